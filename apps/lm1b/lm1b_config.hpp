#pragma once
// The config of mtk-lm1b train, eval and sample: the shared sections (model, train, checkpoint;
// <mtk/config/model_config.hpp>, <mtk/config/training_config.hpp>) and its own `data` and `eval`,
// each from one field table (docs/configuration.md).

#include <mtk/config/config.hpp>
#include <mtk/config/schema.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::lm1b {

/// Every setting outside `model`, `mesh` and `layout`.
struct Settings : config::TrainingSettings {
  std::string data_dir;  ///< data.dir (required by train, eval and sample)
  double eval_logit_scale = 1.0;
  std::int64_t eval_max_batches = 0;
};

/// The `data` section.
const config::Schema<Settings>& data_schema();
/// The `eval` section.
const config::Schema<Settings>& eval_schema();

/// Reads every section but `model` (checked with the model when the data's vocabulary is known):
/// unknown sections and keys, and values out of range, are errors naming the file.
Settings read_settings(const Config& config);

/// The effective config (--print-config, config.resolved.yaml): `given` with `model` and every
/// section of `settings` written in full.
Config effective_config(const Config& given, const Settings& settings,
                        const nn::TransformerConfig& model, int ranks);

/// The Markdown reference of every section mtk-lm1b reads (`mtk-lm1b config-schema`).
std::string config_reference();

}  // namespace mtk::lm1b
