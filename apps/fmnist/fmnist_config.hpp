#pragma once
// The config of mtk-fmnist: sections mesh, layout, data, model, train and checkpoint, each read
// through one field table (config::Schema, docs/configuration.md#mtk-fmnist): unknown sections and
// keys, keys given twice and values out of range are errors naming the file.

#include <mtk/base/program_options.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/schema.hpp>

#include "fmnist_model.hpp"
#include <cstdint>
#include <string>

namespace mtk::fmnist {

/// Every setting of mtk-fmnist but the mesh and layout.
struct Settings {
  Settings() {}  // not an aggregate: GCC 12 warns falsely on Settings{} (-Wmaybe-uninitialized)
  ModelConfig model;  ///< model.* and train.{batch, eval_batch, optimizer, lr, seed}
  std::string data_dir = kDefaultDataDir;
  std::int64_t train_limit = 0, test_limit = 0;
  std::int64_t epochs = 2, steps = 0, log_every = 100;
  std::string run_dir = "run";
  std::int64_t checkpoint_every = 1000;
  int checkpoint_keep = 3;
  bool checkpoint_fletcher32 = false;  ///< checkpoint.fletcher32
  ProgramOptions program;              ///< program.* (the other apps' section)
};

/// The sections on field tables.
const config::Schema<Settings>& data_schema();
const config::Schema<Settings>& model_schema();
const config::Schema<Settings>& train_schema();

/// Reads every section but mesh and layout (the checkpoint section is the training apps' shared
/// one, <mtk/config/training_config.hpp>); then ModelConfig::check() (errors name the file).
Settings read_settings(const Config& config);

/// The effective config (--print-config, config.resolved.yaml, every checkpoint): `given` with the
/// sections of `settings` written in full and `mesh` and `layout` as they are used.
Config effective_config(const Config& given, const Settings& settings, const std::string& mesh,
                        const std::string& layout);

/// The Markdown reference of every section mtk-fmnist reads (`mtk-fmnist config-schema`).
std::string config_reference();

/// The mesh text or map of `config` in the common syntax ("rows:2;cols:2" or {rows: 2, cols: 2}).
/// The old spelling with ',' between dims ("rows:2,cols:2") is deprecated: accepted for one release
/// with a warning naming the new spelling. Without a mesh: rows:2;cols:2 on 4 ranks, rows:1;cols:1
/// on one; other rank counts must give one. A mesh of another number of processors fails naming
/// both.
MeshShape mesh_for_ranks(Config& config, int ranks);

}  // namespace mtk::fmnist
