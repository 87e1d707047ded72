#pragma once
// Mixture of experts (Mesh-TensorFlow moe v1, Shazeer et al. 2017/2018): a feed-forward layer whose
// weights carry an `experts` dim, with top-2 gating, expert capacity and a load-balancing loss.

#include <mtk/nn/layer_context.hpp>

#include <cstdint>
#include <string>

namespace mtk::nn {

/// Whether a token goes to its second-choice expert (Mesh-TF's moe second_policy), decided after
/// the two gates are renormalised to sum to 1: `all` always (while the expert has room), `none`
/// never, `threshold` when its gate exceeds the threshold, `random` with probability
/// min(1, gate / threshold) (Mesh-TF's default, threshold 0.2).
enum class SecondPolicy { all, none, threshold, random };
const char* to_string(SecondPolicy p);

struct MoeOptions {
  int num_experts = 16;
  double capacity_factor_train = 1.25;
  double capacity_factor_eval = 2.0;
  double loss_coefficient = 1e-2;
  SecondPolicy second_policy_train = SecondPolicy::all;
  SecondPolicy second_policy_eval = SecondPolicy::all;
  double second_threshold_train = 0.2;
  double second_threshold_eval = 0.2;
  /// Tokens per routing group, at most (Mesh-TF's moe group_size, 1024 there): the batch's
  /// batch x length tokens are cut, in order, into the fewest equal groups of at most this many
  /// that also split into whole sequences or into equal parts of one sequence, so the groups are
  /// the same on every mesh. 0: each sequence is a group.
  std::int64_t group_size = 0;
};

/// The number of routing groups of `tokens` = batch x length tokens under `group_size` (see
/// MoeOptions::group_size): batch * k (k parts of each sequence) when group_size < length, else
/// batch / s (s whole sequences a group).
std::int64_t moe_num_groups(std::int64_t batch, std::int64_t length, std::int64_t group_size);

/// The seed of the `random` second policy's uniform draws in layer `name` (the draws also mix in
/// the program's step, as dropout's do): [batch, length] values, the same on every mesh.
std::uint64_t second_policy_seed(const LayerContext& ctx, const std::string& name);

struct MoeResult {
  Tensor output;    ///< same shape as x
  Tensor aux_loss;  ///< scalar load-balancing loss (already scaled by the coefficient)
  Tensor combine;   ///< [batch, length, experts_unsplit, expert_capacity] routing weights
  Tensor gates;     ///< [batch, length, experts_unsplit] the router's probabilities
};

/// Mixture of experts: each sequence of x [batch, length, d_model] (or each group of
/// `options.group_size` tokens: x is reshaped to [batch = groups, moe_group, d_model], which keeps
/// a split batch dim local when the groups divide over its mesh dim) is a group; top-2 gating with
/// capacity; dispatch/combine via one_hot and cumsum; experts' FFN weights carry an `experts` dim;
/// tokens move from batch-split to experts-split by a relayout (an alltoall when `experts` and
/// `batch` share a mesh dim). Weights "<name>/gate", "<name>/wi", "<name>/wo".
/// `nonpadding` ([batch, length] float, 1 on tokens and 0 on padding; optional): padding takes
/// no expert and no capacity and counts in neither side of the load-balancing loss (Mesh-TF's
/// `importance`).
MoeResult mixture_of_experts(const LayerContext& ctx, const std::string& name, const Tensor& x,
                             const Dimension& d_model, const Dimension& d_ff,
                             const MoeOptions& options, const Tensor& nonpadding = Tensor());

}  // namespace mtk::nn
