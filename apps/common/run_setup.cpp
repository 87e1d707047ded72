// The run setup every training app shares (training.hpp): the effective config, the config
// reference, the mesh for the job's ranks, the batch slice, the model for the vocabulary.

#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/data/vocab.hpp>

#include "training.hpp"
#include <algorithm>

namespace mtk::app {

Config effective_config(const Config& given, const std::vector<std::string>& sections,
                        const std::function<void(Config&)>& write, int ranks) {
  Config out = Config::from_string("{}", given.origin());
  for (const auto& top : given.keys())
    if (std::find(sections.begin(), sections.end(), top) == sections.end())
      out.copy_from(given, top);
  if (!out.has("mesh"))
    out.set_scalar("mesh", cat("batch:", ranks));
  write(out);
  return out;
}

std::string shared_config_reference() {
  const TrainingSettings defaults;
  return config::markdown_block("model", config::model_schema().markdown("model")) +
         config::markdown_block("train", config::train_schema().markdown("train", defaults)) +
         config::markdown_block("checkpoint",
                                config::checkpoint_schema().markdown("checkpoint", defaults)) +
         config::markdown_block("program", config::program_schema().markdown("program"));
}

int config_schema_main(const std::vector<std::string>& args, const std::string& tool,
                       const std::string& reference) {
  CLI::App app{"Prints the reference of every config key " + tool +
                   " reads (key, type, default, allowed values, meaning) as the Markdown tables "
                   "of docs/configuration.md.",
               tool + " config-schema"};
  cli::configure(app);
  if (const int status = cli::parse(app, args, Communicator::world_rank() == 0); status >= 0)
    return status;
  say(reference);
  return 0;
}

MeshShape mesh_for_ranks(const Config& config, int ranks, const std::string& tool) {
  const MeshShape mesh_shape =
      config.has("mesh") ? config.mesh_shape() : MeshShape::parse("batch:" + std::to_string(ranks));
  // Checked where every rank agrees, rather than by Mesh (which aborts the job).
  if (mesh_shape.num_processors() != ranks)
    fail(tool, cat("mesh ", mesh_shape.to_string(), " has ", mesh_shape.num_processors(),
                   " processors but the job has ", ranks, " ranks; run with mpiexec -n ",
                   mesh_shape.num_processors(), " or change the mesh (--mesh)"));
  return mesh_shape;
}

BatchSlice batch_slice(const LayoutRules& rules, const Mesh& mesh, std::int64_t batch,
                       const std::string& what, const std::string& tool) {
  const int axis = rules.mesh_axis_for("batch", mesh.shape());
  BatchSlice b;
  if (axis < 0)
    return b;
  b.slices = static_cast<int>(mesh.shape()[axis].size);
  b.index = mesh.coordinate(axis);
  if (batch % b.slices != 0)
    fail(tool, cat(what, " = ", batch, " is not divisible by mesh dimension '",
                   mesh.shape()[axis].name, "' of size ", b.slices));
  return b;
}

nn::TransformerConfig model_for_vocabulary(const Config& config, int vocab_size,
                                           const std::string& vocab_path, const std::string& tool) {
  Config cfg = config;
  if (!cfg.has("model.vocab_size"))
    cfg.set("model.vocab_size", std::to_string(vocab_size));
  nn::TransformerConfig model = transformer_config_from(cfg);
  if (model.vocab_size != vocab_size)
    fail(tool, cat(config.origin(), ": model.vocab_size = ", model.vocab_size,
                   " but the vocabulary ", vocab_path, " has ", vocab_size, " pieces"));
  return model;
}

nn::TransformerConfig model_for_printing(const Config& config, const std::string& vocab_path,
                                         bool& vocab_known) {
  vocab_known = config.has("model.vocab_size");
  Config cfg = config;
  if (!vocab_known && !vocab_path.empty()) {
    try {
      cfg.set("model.vocab_size", std::to_string(Vocab::load(vocab_path).size()));
      vocab_known = true;
    } catch (const std::exception&) {  // no data yet: the size stays unknown
    }
  }
  return transformer_config_from(cfg);
}

}  // namespace mtk::app
