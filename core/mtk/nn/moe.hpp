#pragma once
// Mixture of experts (Mesh-TensorFlow moe v1, Shazeer et al. 2017/2018): a feed-forward layer whose
// weights carry an `experts` dim, with top-2 gating, expert capacity and a load-balancing loss.

#include <mtk/nn/layer_context.hpp>

#include <string>

namespace mtk::nn {

struct MoeOptions {
  int num_experts = 16;
  double capacity_factor_train = 1.25;
  double capacity_factor_eval = 2.0;
  double loss_coefficient = 1e-2;
};

struct MoeResult {
  Tensor output;    ///< same shape as x
  Tensor aux_loss;  ///< scalar load-balancing loss (already scaled by the coefficient)
  Tensor combine;   ///< [batch, length, experts_unsplit, expert_capacity] routing weights
};

/// Mixture of experts: each sequence of x [batch, length, d_model] is a group; top-2 gating with
/// capacity; dispatch/combine via one_hot and cumsum; experts' FFN weights carry an `experts` dim;
/// tokens move from batch-split to experts-split by a relayout (an alltoall when `experts` and
/// `batch` share a mesh dim). Weights "<name>/gate", "<name>/wi", "<name>/wo".
MoeResult mixture_of_experts(const LayerContext& ctx, const std::string& name, const Tensor& x,
                             const Dimension& d_model, const Dimension& d_ff,
                             const MoeOptions& options);

}  // namespace mtk::nn
