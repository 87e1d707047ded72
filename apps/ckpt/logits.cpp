// mtk-ckpt logits: MTK's logits of given tokens from a checkpoint (evaluation: no dropout), to
// compare another framework's with (examples/pytorch/, docs/checkpoint-format.md#safetensors).

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/safetensors.hpp>

#include "ckpt_commands.hpp"
#include "cli.hpp"
#include "model_file.hpp"
#include "say.hpp"
#include <cstring>

namespace mtk::ckpt_tool {
namespace {

const char* const kWhere = "mtk-ckpt logits";

// The int32 [batch, length] tensor `name` of the tokens file; "" when absent and `optional`.
std::vector<std::int32_t> token_tensor(const SafetensorsFile& file, const std::string& name,
                                       const std::string& path, std::int64_t batch,
                                       std::int64_t length, bool optional) {
  const auto it = file.tensors.find(name);
  if (it == file.tensors.end()) {
    if (optional)
      return std::vector<std::int32_t>(static_cast<std::size_t>(batch * length), 0);
    fail(kWhere, cat("tokens file '", path, "' has no tensor '", name, "'"));
  }
  const SafetensorsTensor& t = it->second;
  if (t.dtype != "I32" || t.shape != std::vector<std::int64_t>{batch, length})
    fail(kWhere, cat("tokens file '", path, "': '", name, "' must be I32 [", batch, ", ", length,
                     "] like 'inputs'"));
  std::vector<std::int32_t> v(static_cast<std::size_t>(batch * length));
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

}  // namespace

CLI::App* add_logits_command(CLI::App& app, LogitsOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "logits",
      "Writes the logits [batch, length, vocab] (F32 safetensors) the checkpoint's model computes "
      "for the tokens of a safetensors file: I32 [batch, length] 'inputs', 'segments', "
      "'positions' (and 'encoder_inputs', 'encoder_segments', 'encoder_positions' for an "
      "encoder-decoder); length = model.length");
  cli::configure(*sub, "mtk-ckpt logits");
  sub->add_option("CHECKPOINT", o.checkpoint, "Checkpoint, checkpoints/ or run directory")
      ->required();
  sub->add_option("--tokens", o.tokens, "The tokens (safetensors)")->required()->type_name("FILE");
  sub->add_option("--out", o.out, "Where the logits go (safetensors)")
      ->required()
      ->type_name("FILE");
  return sub;
}

int logits_main(const Communicator& world, const LogitsOptions& o) {
  SafetensorsFile tokens;
  std::int64_t batch = 0, length = 0;
  agree_on_failure(world, [&] {
    tokens = read_safetensors(o.tokens, kWhere);
    const auto it = tokens.tensors.find("inputs");
    if (it == tokens.tensors.end() || it->second.shape.size() != 2)
      fail(kWhere, cat("tokens file '", o.tokens, "' has no I32 [batch, length] tensor 'inputs'"));
    batch = it->second.shape[0];
    length = it->second.shape[1];
    if (batch < 1 || length < 1)
      fail(kWhere, cat("tokens file '", o.tokens, "': 'inputs' is empty"));
  });
  CheckpointModel cm;
  load_checkpoint_model(world, o.checkpoint, batch, cm, kWhere);
  const nn::ModelGraph& m = cm.outputs;
  std::map<int, HostTensor> feeds;
  agree_on_failure(world, [&] {
    if (length != cm.model.length)
      fail(kWhere, cat("tokens file '", o.tokens, "' holds sequences of ", length,
                       " tokens; the model's length is ", cm.model.length));
    const Shape shape{{"batch", batch}, {"length", length}};
    std::vector<std::pair<Tensor, std::string>> named = {{m.inputs, "inputs"},
                                                         {m.targets, "targets"},
                                                         {m.segments, "segments"},
                                                         {m.positions, "positions"}};
    if (cm.model.num_encoder_layers > 0)
      named.insert(named.end(), {{m.encoder_inputs, "encoder_inputs"},
                                 {m.encoder_segments, "encoder_segments"},
                                 {m.encoder_positions, "encoder_positions"}});
    for (const auto& [tensor, name] : named)
      feeds[tensor.id()] = HostTensor::ints(
          shape, token_tensor(tokens, name, o.tokens, batch, length, name == "targets"));
  });
  const std::vector<HostTensor> out = cm.program->run(feeds, {m.logits});
  agree_on_failure(world, [&] {
    if (world.rank() != 0)
      return;
    SafetensorsFile file;
    file.tensors["logits"] =
        safetensors_from_floats(sizes_of(out[0].shape()), out[0].data<float>(), false);
    file.metadata = {{"mtk_checkpoint", cm.dir}, {"mtk_step", std::to_string(cm.meta.step)}};
    write_safetensors(o.out, file, kWhere);
  });
  app::say(cat(kWhere, ": logits of ", batch, " x ", length, " tokens from ", cm.dir, " (step ",
               cm.meta.step, ") to ", o.out, "\n"));
  return 0;
}

}  // namespace mtk::ckpt_tool
