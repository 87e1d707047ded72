#include <mtk/base/error.hpp>
#include <mtk/kernels/random.hpp>
#include <mtk/nn/impl/weights.hpp>
#include <mtk/nn/moe.hpp>
#include <mtk/ops/cumsum.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/softmax.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>
#include <mtk/ops/top_1.hpp>

#include <algorithm>

namespace mtk::nn {
namespace {

using impl::weight;

// The dims of one MoE layer: x is [batch, length, d_model]; the experts see [experts,
// batch_unsplit, expert_capacity, ...] after the relayout.
struct MoeDims {
  Dimension batch, length, d_model, d_ff, experts_unsplit, experts, batch_unsplit, capacity;
};

MoeDims moe_dims(const LayerContext& ctx, const Tensor& x, const Dimension& d_model,
                 const Dimension& d_ff, const MoeOptions& options) {
  if (x.shape().rank() != 3 || x.shape()[2].name != d_model.name)
    fail("mtk::nn::mixture_of_experts",
         cat("expects x [batch, length, ", d_model.name, "], got ", x.shape().to_string()));
  const Dimension batch = x.shape()[0], length = x.shape()[1];
  const std::int64_t E = options.num_experts;
  const double cf = ctx.training ? options.capacity_factor_train : options.capacity_factor_eval;
  const std::int64_t capacity = std::min<std::int64_t>(
      length.size, std::max<std::int64_t>(std::min<std::int64_t>(4, length.size),
                                          static_cast<std::int64_t>(length.size * cf / E)));
  return {batch,
          length,
          d_model,
          d_ff,
          {"experts_unsplit", E},
          {"experts", E},
          {"batch_unsplit", batch.size},
          {"expert_capacity", capacity}};
}

// Top-2 gating: each token's two most probable experts, their renormalised gates, and the
// load-balancing loss (fraction of tokens routed to each expert x mean gate probability).
struct Top2Gating {
  Tensor gate_1, mask_1, gate_2, mask_2, aux_loss, raw;
};

// mask_2 after the second policy of this pass (gate_2 renormalised already).
Tensor second_expert_mask(const LayerContext& ctx, const std::string& name, const Tensor& mask_2,
                          const Tensor& gate_2, const MoeOptions& o) {
  const SecondPolicy policy = ctx.training ? o.second_policy_train : o.second_policy_eval;
  const double threshold = ctx.training ? o.second_threshold_train : o.second_threshold_eval;
  Graph& g = *ctx.graph;
  switch (policy) {
    case SecondPolicy::all:
      return mask_2;
    case SecondPolicy::none:
      return multiply(mask_2, 0.0);
    case SecondPolicy::threshold:
      return mask_2 * greater(gate_2, constant(g, Shape(), threshold));
    case SecondPolicy::random: {
      Tensor u = random_uniform(g, gate_2.shape(), second_policy_seed(ctx, name));
      return mask_2 * less(u, multiply(gate_2, 1.0 / std::max(threshold, 1e-9)));
    }
  }
  return mask_2;
}

Top2Gating top2_gating(const LayerContext& ctx, const std::string& name, const Tensor& x,
                       const MoeDims& d, const MoeOptions& options, const Tensor& nonpadding) {
  Graph& g = *ctx.graph;
  const double loss_coefficient = options.loss_coefficient;
  const std::string& experts = d.experts_unsplit.name;
  const std::int64_t E = d.experts_unsplit.size;
  Tensor wg = weight(g, name + "/gate", Shape{d.d_model, d.experts_unsplit}, d.d_model.size);
  Tensor raw = softmax(einsum({x, wg}, Shape{d.batch, d.length, d.experts_unsplit}), experts);
  auto [gate_1, index_1] = top_1(raw, experts);
  Tensor mask_1 = one_hot(index_1, d.experts_unsplit);
  Tensor proxy = raw;
  if (nonpadding.valid()) {  // padding: no first expert, no part in the balancing loss
    mask_1 = mask_1 * nonpadding;
    gate_1 = gate_1 * nonpadding;
    proxy = proxy * nonpadding;
  }
  Tensor density = reduce_mean(mask_1, {d.length.name});
  Tensor density_proxy = reduce_mean(proxy, {d.length.name});
  Tensor aux =
      multiply(reduce_mean(density * density_proxy), static_cast<double>(E * E) * loss_coefficient);
  Tensor raw_2 = raw * add(negative(mask_1), 1.0);
  auto [gate_2, index_2] = top_1(raw_2, experts);
  Tensor mask_2 = one_hot(index_2, d.experts_unsplit);
  if (nonpadding.valid())
    mask_2 = mask_2 * nonpadding;
  Tensor denom = add(gate_1 + gate_2, 1e-9);
  gate_1 = gate_1 / denom;
  gate_2 = gate_2 / denom;
  mask_2 = second_expert_mask(ctx, name, mask_2, gate_2, options);
  return {gate_1, mask_1, gate_2, mask_2, aux, raw};
}

// Routing weights [batch, length, experts_unsplit, expert_capacity]: each token's position in its
// experts' buffers; tokens beyond the capacity are dropped (their output is 0 and the residual
// connection passes them through).
Tensor combine_weights(Graph& g, Top2Gating r, const MoeDims& d) {
  const std::string& length = d.length.name;
  const std::string& experts = d.experts_unsplit.name;
  Tensor cap_c = constant(g, Shape(), static_cast<double>(d.capacity.size));
  Tensor pos_1 = cumsum(r.mask_1, length, true) * r.mask_1;
  r.mask_1 = r.mask_1 * less(pos_1, cap_c);
  Tensor count_1 = reduce_sum(r.mask_1, {length});
  Tensor flat_1 = reduce_sum(r.mask_1, {experts});
  Tensor pflat_1 = reduce_sum(pos_1 * r.mask_1, {experts});
  Tensor pos_2 = (cumsum(r.mask_2, length, true) + count_1) * r.mask_2;
  r.mask_2 = r.mask_2 * less(pos_2, cap_c);
  Tensor flat_2 = reduce_sum(r.mask_2, {experts});
  Tensor pflat_2 = reduce_sum(pos_2 * r.mask_2, {experts});
  const Shape combine_shape{d.batch, d.length, d.experts_unsplit, d.capacity};
  return einsum({r.gate_1 * flat_1, r.mask_1, one_hot(cast(pflat_1, DType::int32), d.capacity)},
                combine_shape) +
         einsum({r.gate_2 * flat_2, r.mask_2, one_hot(cast(pflat_2, DType::int32), d.capacity)},
                combine_shape);
}

// The experts' feed-forward layers on their buffers [experts_unsplit, batch, capacity, d_model]:
// tokens move from batch-split to experts-split and back by reshapes (relayouts).
Tensor expert_layers(const LayerContext& ctx, const std::string& name, const Tensor& expert_in,
                     const MoeDims& d) {
  Graph& g = *ctx.graph;
  Tensor in = reshape(expert_in, Shape{d.experts, d.batch_unsplit, d.capacity, d.d_model});
  Tensor w1 = weight(g, name + "/wi", Shape{d.experts, d.d_model, d.d_ff}, d.d_model.size);
  Tensor w2 = weight(g, name + "/wo", Shape{d.experts, d.d_ff, d.d_model}, d.d_ff.size);
  Tensor h = relu(einsum({in, w1}, Shape{d.experts, d.batch_unsplit, d.capacity, d.d_ff}));
  h = ctx.dropout(h, name + "/dropout");
  Tensor out = einsum({h, w2}, Shape{d.experts, d.batch_unsplit, d.capacity, d.d_model});
  return reshape(out, Shape{d.experts_unsplit, d.batch, d.capacity, d.d_model});
}

}  // namespace

const char* to_string(SecondPolicy p) {
  switch (p) {
    case SecondPolicy::all:
      return "all";
    case SecondPolicy::none:
      return "none";
    case SecondPolicy::threshold:
      return "threshold";
    case SecondPolicy::random:
      return "random";
  }
  return "?";
}

std::uint64_t second_policy_seed(const LayerContext& ctx, const std::string& name) {
  return ctx.seed ^ kernels::hash_name(name + "/second_policy");
}

std::int64_t moe_num_groups(std::int64_t batch, std::int64_t length, std::int64_t group_size) {
  if (batch < 1 || length < 1 || group_size < 0)
    fail("mtk::nn::moe_num_groups", cat("batch ", batch, ", length ", length, " and group_size ",
                                        group_size, " must be positive (group_size 0: sequences)"));
  if (group_size == 0 || group_size == length)
    return batch;
  if (group_size < length) {  // the fewest equal parts of a sequence no longer than group_size
    std::int64_t k = (length + group_size - 1) / group_size;
    while (length % k != 0)
      ++k;
    return batch * k;
  }
  std::int64_t s = std::min(batch, group_size / length);  // the most whole sequences that fit
  while (batch % s != 0)
    --s;
  return batch / s;
}

namespace {

// The layer on x [batch, length, d_model], each row of `length` tokens one group.
MoeResult moe_on_groups(const LayerContext& ctx, const std::string& name, const Tensor& x,
                        const Dimension& d_model, const Dimension& d_ff, const MoeOptions& options,
                        const Tensor& nonpadding) {
  Graph& g = *ctx.graph;
  const MoeDims d = moe_dims(ctx, x, d_model, d_ff, options);
  g.offer_split(d.experts.name);  // expert parallelism
  g.offer_split(d.d_ff.name);
  Top2Gating gating = top2_gating(ctx, name, x, d, options, nonpadding);
  Tensor combine = combine_weights(g, gating, d);
  Tensor dispatch = stop_gradient(greater(combine, constant(g, Shape(), 0.0)));
  Tensor expert_in =
      einsum({dispatch, x}, Shape{d.experts_unsplit, d.batch, d.capacity, d.d_model});
  Tensor expert_out = expert_layers(ctx, name, expert_in, d);
  Tensor y = einsum({combine, expert_out}, x.shape());
  return {y, gating.aux_loss, combine, gating.raw};
}

}  // namespace

MoeResult mixture_of_experts(const LayerContext& ctx, const std::string& name, const Tensor& x,
                             const Dimension& d_model, const Dimension& d_ff,
                             const MoeOptions& options, const Tensor& nonpadding) {
  const char* where = "mtk::nn::mixture_of_experts";
  if (x.shape().rank() != 3 || x.shape()[2].name != d_model.name)
    fail(where, cat("expects x [batch, length, ", d_model.name, "], got ", x.shape().to_string()));
  const Dimension batch = x.shape()[0], length = x.shape()[1];
  if (nonpadding.valid() && nonpadding.shape() != Shape{batch, length})
    fail(where, cat("nonpadding must be [", batch.name, ", ", length.name,
                    "] like x's first dims, got ", nonpadding.shape().to_string()));
  const std::int64_t groups = moe_num_groups(batch.size, length.size, options.group_size);
  if (groups == batch.size)
    return moe_on_groups(ctx, name, x, d_model, d_ff, options, nonpadding);
  // Groups of tokens in order: [batch, length] -> [batch = groups, moe_group]; the batch dim
  // keeps its name (and so its layout rule).
  const Dimension group_batch{batch.name, groups},
      group{"moe_group", batch.size * length.size / groups};
  const Tensor xg = reshape(x, Shape{group_batch, group, d_model});
  const Tensor ng = nonpadding.valid() ? reshape(nonpadding, Shape{group_batch, group}) : Tensor();
  MoeResult r = moe_on_groups(ctx, name, xg, d_model, d_ff, options, ng);
  const Shape& cs = r.combine.shape();
  return {reshape(r.output, x.shape()), r.aux_loss,
          reshape(r.combine, Shape{batch, length, cs[2], cs[3]}),
          reshape(r.gates, Shape{batch, length, r.gates.shape()[2]})};
}

}  // namespace mtk::nn
