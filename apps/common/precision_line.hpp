#pragma once
// The start-up line saying in which dtypes a training run computes and keeps its state, printed
// when any of them is not float32: the contractions (model.activation_dtype, and how bf16 ones run
// on this machine), the variables (train.variable_dtype) and the optimizer's slots
// (train.optimizer_slot_dtype); docs/memory.md#bfloat16-variables-and-slots.

#include <mtk/config/optimizer_config.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <string>

namespace mtk::app {

/// "precision: compute bfloat16 (<how bf16 contractions run here>), variables bfloat16, optimizer
/// slots float32"; "" when all three are float32.
std::string precision_line(const nn::TransformerConfig& model,
                           const config::OptimizerSettings& optimizer);

/// Rank 0 says precision_line() (when not empty, indented as the start-up lines), and `tool`
/// warns when bf16 contractions are emulated on this machine (no native bf16 matmul: slower than
/// float32).
void say_precision(const std::string& tool, const nn::TransformerConfig& model,
                   const config::OptimizerSettings& optimizer);

}  // namespace mtk::app
