#pragma once
// Fused losses.

#include <mtk/graph/graph.hpp>

#include <string>

namespace mtk {

/// Fused softmax cross-entropy of logits [..., dim] against int32 targets [...] (the logits' dims
/// without `dim`): lse - (1 - ls) x_target - ls / V sum(x) + z lse^2 per row, where lse is the
/// log-sum-exp of the row. Never materialises probabilities or one-hot targets; `dim` may be split.
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const std::string& dim,
                             double label_smoothing = 0.0, double z_loss = 0.0);

/// The per-row log-sum-exp that softmax_cross_entropy computed beside `loss` (its output 0), for
/// a z-loss or a diagnostic; fails when `loss` is not such an output.
Tensor softmax_cross_entropy_log_sum_exp(const Tensor& loss);

}  // namespace mtk
