#pragma once
// The `model` section of an MTK config file -> TransformerConfig.

#include <mtk/config/config.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <string>

namespace mtk {

/// Reads `section` (default "model"). `preset: paper_lm:-1` (or paper_translation:N) starts from
/// the paper's config; the other keys override it. Unknown keys are errors naming the key and file.
nn::TransformerConfig transformer_config_from(const Config& config,
                                              const std::string& section = "model");

/// Throws naming the first key under `section` that is not in `known` (nested keys "a.b").
void reject_unknown_keys(const Config& config, const std::string& section,
                         const std::vector<std::string>& known);

}  // namespace mtk
