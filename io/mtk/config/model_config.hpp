#pragma once
// The `model` section of an MTK config file <-> TransformerConfig, both ways from one field table
// (model_schema(); docs/configuration.md#model).

#include <mtk/config/config.hpp>
#include <mtk/config/known_keys.hpp>
#include <mtk/config/schema.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <string>

namespace mtk {

namespace config {

/// The fields of the `model` section: `preset` (paper_lm:N, paper_translation:N) and every member
/// of nn::TransformerConfig, `moe.*` those of nn::MoeOptions.
const Schema<nn::TransformerConfig>& model_schema();

}  // namespace config

/// Reads `section` (default "model"). `preset: paper_lm:-1` (or paper_translation:N) starts from
/// the paper's config; the other keys override it. Unknown keys are errors naming the key and file.
nn::TransformerConfig transformer_config_from(const Config& config,
                                              const std::string& section = "model");

/// Writes every key of `model` under `section` of `config` (no preset: its values are written),
/// so that transformer_config_from(config, section) returns `model` exactly.
void write_transformer_config(Config& config, const nn::TransformerConfig& model,
                              const std::string& section = "model");

/// `model` as the YAML text of a config with one section `section`.
std::string transformer_config_yaml(const nn::TransformerConfig& model,
                                    const std::string& section = "model");

}  // namespace mtk
