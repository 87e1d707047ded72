// mtk-ckpt import: a step-0 checkpoint of a config's model from a safetensors file (an export, or
// weights from elsewhere under the same names and dims), written by MTK's checkpoint writer so that
// `train` starts from it on any mesh (docs/checkpoint-format.md#safetensors).

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/checkpoint/safetensors.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/config/optimizer_config.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/files/files.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/training_graph.hpp>

#include <Kokkos_Core.hpp>

#include "auto_plan.hpp"
#include "ckpt_commands.hpp"
#include "cli.hpp"
#include "model_file.hpp"
#include "say.hpp"
#include "training.hpp"
#include <algorithm>
#include <filesystem>

namespace mtk::ckpt_tool {
namespace {

const char* const kWhere = "mtk-ckpt import";

// The config's model; model.vocab_size, when the config leaves it to the data, is the file's.
nn::TransformerConfig import_model(Config& config, const SafetensorsFile& file,
                                   const std::string& path) {
  nn::TransformerConfig from_file;
  const auto meta = file.metadata.find("mtk_model");
  if (meta != file.metadata.end())
    read_model_json(meta->second, from_file, cat("safetensors file '", path, "'"), kWhere);
  if (!config.has("model.vocab_size")) {
    std::int64_t vocab = meta != file.metadata.end() ? from_file.vocab_size : 0;
    for (const char* table : {"decoder/embedding", "shared/embedding"})
      if (vocab == 0 && file.tensors.count(table) && !file.tensors.at(table).shape.empty())
        vocab = file.tensors.at(table).shape[0];
    if (vocab == 0)
      fail(kWhere, cat(config.origin(), " sets no model.vocab_size and safetensors file '", path,
                       "' does not say it (no mtk_model metadata, no embedding table)"));
    config.set("model.vocab_size", std::to_string(vocab));
  }
  nn::TransformerConfig model = transformer_config_from(config);
  if (meta != file.metadata.end())
    for (const auto& line : model_differences(from_file, model))
      app::say(cat("  note: the file's model differs from the config's: ", line, "\n"));
  return model;
}

// Every variable of the model must be in the file with its shape, and the file holds nothing
// else: one error naming each difference (both shapes).
void check_variables(const std::map<std::string, Shape>& vars, const SafetensorsFile& file,
                     const std::string& path) {
  std::vector<std::string> problems;
  for (const auto& [name, shape] : vars) {
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      problems.push_back(cat("variable '", name, "' ", shape.to_string(), " is not in the file"));
      continue;
    }
    if (it->second.shape != sizes_of(shape)) {
      std::string sizes;
      for (std::int64_t s : it->second.shape)
        sizes += cat(sizes.empty() ? "" : ", ", s);
      problems.push_back(
          cat("variable '", name, "': the file has [", sizes, "], the model ", shape.to_string()));
    }
    if (it->second.dtype != "F32" && it->second.dtype != "BF16")
      problems.push_back(
          cat("variable '", name, "' is ", it->second.dtype, "; F32 or BF16 expected"));
  }
  for (const auto& entry : file.tensors)
    if (!vars.count(entry.first))
      problems.push_back(cat("tensor '", entry.first, "' of the file is no variable of the model"));
  if (problems.empty())
    return;
  std::string text;
  for (const auto& p : problems)
    text += "\n  " + p;
  fail(kWhere, cat("safetensors file '", path, "' does not fit the config's model (",
                   problems.size(), " difference(s)):", text));
}

// A run directory with checkpoints or metrics is someone's run: never written over.
void check_run_dir(const std::string& run_dir) {
  namespace fs = std::filesystem;
  for (const char* entry : {"checkpoints", "metrics.jsonl"})
    if (fs::exists(fs::path(run_dir) / entry))
      fail(kWhere, cat("run directory '", run_dir, "' already has ", entry,
                       "; import into a new run directory"));
}

// Sets this rank's slice of every model variable of `program` from the file's values.
void set_weights(Program& program, const Mesh& mesh, const std::map<std::string, Shape>& vars,
                 const SafetensorsFile& file, const std::string& path) {
  for (const auto& [name, shape] : vars) {
    const std::vector<float> global = safetensors_floats(file, name, path, kWhere);
    const TensorLayout& layout = program.variable_layout(name);
    const auto origin = layout.slice_origin(mesh.coordinates());
    const std::vector<float> local =
        block_of(global, sizes_of(shape), std::vector<std::int64_t>(origin.begin(), origin.end()),
                 sizes_of(layout.slice_shape()));
    Kokkos::View<float*> view("mtk::ckpt::import::" + name, local.size());
    Kokkos::deep_copy(view,
                      Kokkos::View<const float*, Kokkos::HostSpace>(local.data(), local.size()));
    program.set_variable_slice(name, view);
  }
}

}  // namespace

CLI::App* add_import_command(CLI::App& app, ImportOptions& o) {
  CLI::App* sub = app.add_subcommand(
      "import",
      "Creates a step-0 checkpoint of a config's model from a safetensors file (an export); "
      "`train` with the same --run-dir starts from it, on any mesh");
  cli::configure(*sub, "mtk-ckpt import");
  sub->add_option("FILE", o.file, "The safetensors file")->required();
  sub->add_option("--config", o.config, "The YAML config of the model (mtk-lm1b or mtk-wmt)")
      ->required()
      ->type_name("FILE");
  sub->add_option("--run-dir", o.run_dir, "A new run directory: checkpoints/step-000000000")
      ->required()
      ->type_name("DIR");
  sub->add_option("--mesh", o.mesh, "Overrides `mesh`")->type_name("M");
  sub->add_option("--layout", o.layout, "Overrides `layout`")->type_name("L");
  sub->add_option("--set", o.sets, "Overrides one setting (repeatable)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all();
  return sub;
}

int import_main(const Communicator& world, const ImportOptions& io) {
  app::RunOptions o;
  o.config_path = io.config;
  o.run_dir = io.run_dir;
  o.mesh = io.mesh;
  o.layout = io.layout;
  o.sets = io.sets;
  SafetensorsFile file;
  nn::TransformerConfig model;
  std::map<std::string, Shape> vars;
  config::TrainingSettings settings;
  MeshShape mesh_shape;
  LayoutRules rules;
  agree_on_failure(world, [&] {  // every rank reads the file (a shared file system)
    app::load_config(o);
    if (world.rank() == 0)
      check_run_dir(o.run_dir);
    file = read_safetensors(io.file, kWhere);
    model = import_model(o.config, file, io.file);
    vars = model_variables(model);
    check_variables(vars, file, io.file);
    settings = config::read_training_settings(o.config);
    // The layout only decides how the checkpoint is sliced; any mesh restores it.
    mesh_shape = app::is_auto(o.config, "mesh")
                     ? MeshShape::parse("batch:" + std::to_string(world.size()))
                     : app::mesh_for_ranks(o.config, world.size(), kWhere);
    rules = app::is_auto(o.config, "layout") ? LayoutRules() : o.config.layout_rules();
  });
  const Mesh mesh(mesh_shape, world);
  // The training program `train` builds (optimizer slots and counters at their start values), so
  // that train resumes from the checkpoint as from its own.
  Graph g(settings.program);
  auto optimizer = config::make_optimizer(settings.optimizer);
  if (settings.optimizer.shard)
    optimizer->set_sharding({rules, mesh_shape});
  agree_on_failure(world, [&] {
    nn::build_training(g, model, static_cast<int>(settings.microbatches), *optimizer, settings.lr,
                       settings.seed);
  });
  auto program = lower(g, mesh, optimizer->layout_rules(rules));
  agree_on_failure(world, [&] { set_weights(*program, mesh, vars, file, io.file); });

  CheckpointMetadata md;
  md.step = 0;
  write_transformer_config(o.config, model);
  md.config_yaml = o.config.dump();
  md.layout = rules.to_string();
  const auto fp = file.metadata.find("mtk_vocab_fingerprint");
  md.vocab_fingerprint = fp == file.metadata.end() ? "" : fp->second;
  agree_on_failure(world, [&] {
    if (world.rank() == 0)
      make_directories(o.run_dir, kWhere);
  });
  CheckpointOptions written;
  written.fletcher32 = settings.checkpoint_fletcher32;  // checkpoint.fletcher32
  CheckpointManager manager(o.run_dir, std::max(1, settings.checkpoint_keep), mesh, written);
  const std::string path = manager.save(*program, md);
  app::say(cat(kWhere, ": ", vars.size(), " variables of ", io.file, " -> ", path, " (mesh ",
               mesh_shape.to_string(), "); `train --run-dir ", o.run_dir, "` starts from it\n"));
  return 0;
}

}  // namespace mtk::ckpt_tool
