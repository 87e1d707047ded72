// mtk-ckpt export: a checkpoint's model weights as a safetensors file, under the variables' names
// with their dims in MTK's order (docs/checkpoint-format.md#safetensors).

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/safetensors.hpp>

#include "ckpt_commands.hpp"
#include "cli.hpp"
#include "model_file.hpp"
#include "say.hpp"

namespace mtk::ckpt_tool {

CLI::App* add_export_command(CLI::App& app, ExportOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "export",
      "Writes the model's weights (no optimizer state) of a checkpoint of mtk-lm1b or mtk-wmt to "
      "a safetensors file: float32, or bfloat16 with --dtype bf16; the same checkpoint gives the "
      "same bytes");
  cli::configure(*sub, "mtk-ckpt export");
  sub->add_option("CHECKPOINT", o.checkpoint, "Checkpoint, checkpoints/ or run directory")
      ->required();
  sub->add_option("--format", o.format, "Output format (safetensors)")
      ->check(CLI::IsMember({"safetensors"}));
  sub->add_option("--out", o.out, "The file to write")->required()->type_name("FILE");
  sub->add_option("--dtype", o.dtype, "f32 (default) or bf16 (rounded to nearest even)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  return sub;
}

int export_main(const Communicator& world, const ExportOptions& o) {
  const std::string where = "mtk-ckpt export";
  CheckpointModel cm;
  load_checkpoint_model(world, o.checkpoint, 0, cm, where);
  const std::map<std::string, Shape> vars = model_variables(cm.model);
  SafetensorsFile file;
  std::int64_t values = 0;
  for (const auto& [name, shape] : vars) {
    const HostTensor v = cm.program->variable_value(name);  // collective
    if (world.rank() == 0)
      file.tensors[name] =
          safetensors_from_floats(sizes_of(shape), v.data<float>(), o.dtype == "bf16");
    values += shape.num_elements();
  }
  agree_on_failure(world, [&] {
    if (world.rank() != 0)
      return;
    file.metadata = export_metadata(cm.model, cm.meta.vocab_fingerprint, vars);
    write_safetensors(o.out, file, where);
  });
  app::say(cat(where, ": ", vars.size(), " variables, ", values, " values (",
               o.dtype == "bf16" ? "BF16" : "F32", ") of ", cm.dir, " (step ", cm.meta.step,
               ") to ", o.out, "\n"));
  return 0;
}

}  // namespace mtk::ckpt_tool
