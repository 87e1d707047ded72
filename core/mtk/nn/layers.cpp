#include <mtk/base/error.hpp>
#include <mtk/kernels/kernels.hpp>
#include <mtk/nn/layers.hpp>

#include <algorithm>
#include <cmath>

namespace mtk::layers {
namespace {

// Dims of x without `drop`, followed by `add`.
Shape replace_dims(const Shape& x, const std::vector<std::string>& drop,
                   const std::vector<Dimension>& add) {
  std::vector<Dimension> dims;
  for (const auto& d : x.dims())
    if (std::find(drop.begin(), drop.end(), d.name) == drop.end())
      dims.push_back(d);
  dims.insert(dims.end(), add.begin(), add.end());
  return Shape(dims);
}

// A weight initialised with variance scaling over its fan-in.
Tensor weight(Graph& g, const std::string& name, const Shape& shape, std::int64_t fan_in) {
  return variable(
      g, name, shape,
      Initializer::normal(static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)))));
}

}  // namespace

Tensor LayerContext::dropout(const Tensor& x, const std::string& name) const {
  if (!training || dropout_rate <= 0.0)
    return x;
  return mtk::dropout(x, dropout_rate, seed ^ kernels::hash_name(name));
}

Tensor embedding(const LayerContext& ctx, const std::string& name, const Tensor& ids,
                 const Dimension& vocab, const Dimension& d_model) {
  Tensor table = variable(*ctx.graph, name, Shape{vocab, d_model}, Initializer::normal(1.0f));
  return gather(table, ids, vocab.name);
}

Tensor layer_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                  const std::string& dim, double epsilon) {
  const Dimension d = x.shape().dim(dim);
  Tensor scale = variable(*ctx.graph, name + "/scale", Shape{d}, Initializer::ones());
  Tensor bias = variable(*ctx.graph, name + "/bias", Shape{d}, Initializer::zeros());
  Tensor centered = x - reduce_mean(x, {dim});
  Tensor variance = reduce_mean(square(centered), {dim});
  return centered * rsqrt(add(variance, epsilon)) * scale + bias;
}

Tensor rms_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                const std::string& dim, double epsilon) {
  const Dimension d = x.shape().dim(dim);
  Tensor scale = variable(*ctx.graph, name + "/scale", Shape{d}, Initializer::ones());
  Tensor variance = reduce_mean(square(x), {dim});
  return x * rsqrt(add(variance, epsilon)) * scale;
}

Tensor attention_bias(Graph& g, const Dimension& length, const Dimension& memory_length,
                      bool causal, const Tensor& query_segment, const Tensor& memory_segment) {
  Tensor bias;
  if (causal) {
    Tensor q = cast(range(g, length), DType::float32);
    Tensor m = cast(range(g, memory_length), DType::float32);
    bias = multiply(less(q, m), -1e9);  // [length, memory_length]: the future is masked
  }
  if (query_segment.valid() && memory_segment.valid()) {
    Tensor qs = cast(query_segment, DType::float32);
    Tensor ms = cast(memory_segment, DType::float32);
    if (!ms.shape().contains(memory_length.name))
      fail("mtk::layers::attention_bias", cat("memory segment ids ", ms.shape().to_string(),
                                              " lack dimension '", memory_length.name, "'"));
    Tensor other = multiply(add(negative(equal(qs, ms)), 1.0), -1e9);
    bias = bias.valid() ? other + bias : other;
  }
  if (!bias.valid())
    bias = constant(g, Shape(), 0.0);
  return bias;
}

Tensor multihead_attention(const LayerContext& ctx, const std::string& name, const Tensor& x,
                           const Tensor& memory, const Tensor& bias, const Dimension& d_model,
                           const Dimension& heads, const Dimension& d_kv,
                           const std::string& length_dim, const std::string& memory_length_dim) {
  Graph& g = *ctx.graph;
  Tensor mem = memory.shape().contains(memory_length_dim)
                   ? memory
                   : rename_dimension(memory, length_dim, memory_length_dim);
  const std::int64_t dm = d_model.size;
  Tensor wq = weight(g, name + "/q", Shape{d_model, heads, d_kv}, dm);
  Tensor wk = weight(g, name + "/k", Shape{d_model, heads, d_kv}, dm);
  Tensor wv = weight(g, name + "/v", Shape{d_model, heads, d_kv}, dm);
  Tensor wo = weight(g, name + "/o", Shape{heads, d_kv, d_model}, heads.size * d_kv.size);
  Tensor q = einsum({x, wq}, replace_dims(x.shape(), {d_model.name}, {heads, d_kv}));
  q = multiply(q, 1.0 / std::sqrt(static_cast<double>(d_kv.size)));
  Tensor k = einsum({mem, wk}, replace_dims(mem.shape(), {d_model.name}, {heads, d_kv}));
  Tensor v = einsum({mem, wv}, replace_dims(mem.shape(), {d_model.name}, {heads, d_kv}));
  // logits [batch..., heads, length, memory_length]
  std::vector<Dimension> ld;
  for (const auto& d : x.shape().dims())
    if (d.name != d_model.name && d.name != length_dim)
      ld.push_back(d);
  ld.push_back(heads);
  ld.push_back(x.shape().dim(length_dim));
  ld.push_back(mem.shape().dim(memory_length_dim));
  Tensor logits = einsum({q, k}, Shape(ld));
  logits = binary(BinaryFn::add, logits, bias, nullptr);
  if (logits.shape() != Shape(ld))
    logits = einsum({logits}, Shape(ld));
  Tensor weights = ctx.dropout(softmax(logits, memory_length_dim), name + "/dropout");
  Tensor o = einsum({weights, v}, replace_dims(x.shape(), {d_model.name}, {heads, d_kv}));
  return einsum({o, wo}, x.shape());
}

Tensor dense_relu_dense(const LayerContext& ctx, const std::string& name, const Tensor& x,
                        const Dimension& d_model, const Dimension& d_ff, bool use_gelu) {
  Graph& g = *ctx.graph;
  Tensor wi = weight(g, name + "/wi", Shape{d_model, d_ff}, d_model.size);
  Tensor wo = weight(g, name + "/wo", Shape{d_ff, d_model}, d_ff.size);
  Tensor h = einsum({x, wi}, replace_dims(x.shape(), {d_model.name}, {d_ff}));
  h = use_gelu ? gelu(h) : relu(h);
  h = ctx.dropout(h, name + "/dropout");
  return einsum({h, wo}, x.shape());
}

MoeResult mixture_of_experts(const LayerContext& ctx, const std::string& name, const Tensor& x,
                             const Dimension& d_model, const Dimension& d_ff,
                             const MoeOptions& options) {
  Graph& g = *ctx.graph;
  const char* where = "mtk::layers::mixture_of_experts";
  if (x.shape().rank() != 3 || x.shape()[2].name != d_model.name)
    fail(where, cat("expects x [batch, length, ", d_model.name, "], got ", x.shape().to_string()));
  const Dimension batch = x.shape()[0], length = x.shape()[1];
  const std::int64_t E = options.num_experts;
  const Dimension experts_unsplit{"experts_unsplit", E}, experts{"experts", E};
  const Dimension batch_unsplit{"batch_unsplit", batch.size};
  const double cf = ctx.training ? options.capacity_factor_train : options.capacity_factor_eval;
  const std::int64_t capacity = std::min<std::int64_t>(
      length.size, std::max<std::int64_t>(std::min<std::int64_t>(4, length.size),
                                          static_cast<std::int64_t>(length.size * cf / E)));
  const Dimension cap{"expert_capacity", capacity};

  // Gating: softmax over experts, top-2.
  Tensor wg = weight(g, name + "/gate", Shape{d_model, experts_unsplit}, d_model.size);
  Tensor raw =
      softmax(einsum({x, wg}, Shape{batch, length, experts_unsplit}), experts_unsplit.name);
  auto [gate_1, index_1] = top_1(raw, experts_unsplit.name);
  Tensor mask_1 = one_hot(index_1, experts_unsplit);
  // Load-balancing loss: fraction of tokens routed to each expert x mean gate probability.
  Tensor density = reduce_mean(mask_1, {length.name});
  Tensor density_proxy = reduce_mean(raw, {length.name});
  Tensor aux = multiply(reduce_mean(density * density_proxy),
                        static_cast<double>(E * E) * options.loss_coefficient);
  Tensor raw_2 = raw * add(negative(mask_1), 1.0);
  auto [gate_2, index_2] = top_1(raw_2, experts_unsplit.name);
  Tensor mask_2 = one_hot(index_2, experts_unsplit);
  Tensor denom = add(gate_1 + gate_2, 1e-9);
  gate_1 = gate_1 / denom;
  gate_2 = gate_2 / denom;

  // Positions in each expert's buffer; tokens beyond the capacity are dropped (their output is 0
  // and the residual connection passes them through).
  Tensor cap_c = constant(g, Shape(), static_cast<double>(capacity));
  Tensor pos_1 = cumsum(mask_1, length.name, true) * mask_1;
  mask_1 = mask_1 * less(pos_1, cap_c);
  Tensor count_1 = reduce_sum(mask_1, {length.name});
  Tensor flat_1 = reduce_sum(mask_1, {experts_unsplit.name});
  Tensor pflat_1 = reduce_sum(pos_1 * mask_1, {experts_unsplit.name});
  Tensor pos_2 = (cumsum(mask_2, length.name, true) + count_1) * mask_2;
  mask_2 = mask_2 * less(pos_2, cap_c);
  Tensor flat_2 = reduce_sum(mask_2, {experts_unsplit.name});
  Tensor pflat_2 = reduce_sum(pos_2 * mask_2, {experts_unsplit.name});
  const Shape combine_shape{batch, length, experts_unsplit, cap};
  Tensor combine =
      einsum({gate_1 * flat_1, mask_1, one_hot(cast(pflat_1, DType::int32), cap)}, combine_shape) +
      einsum({gate_2 * flat_2, mask_2, one_hot(cast(pflat_2, DType::int32), cap)}, combine_shape);
  Tensor dispatch = stop_gradient(greater(combine, constant(g, Shape(), 0.0)));

  // Dispatch, then move tokens from batch-split to experts-split.
  Tensor expert_in = einsum({dispatch, x}, Shape{experts_unsplit, batch, cap, d_model});
  expert_in = reshape(expert_in, Shape{experts, batch_unsplit, cap, d_model});
  Tensor w1 = weight(g, name + "/wi", Shape{experts, d_model, d_ff}, d_model.size);
  Tensor w2 = weight(g, name + "/wo", Shape{experts, d_ff, d_model}, d_ff.size);
  Tensor h = relu(einsum({expert_in, w1}, Shape{experts, batch_unsplit, cap, d_ff}));
  h = ctx.dropout(h, name + "/dropout");
  Tensor expert_out = einsum({h, w2}, Shape{experts, batch_unsplit, cap, d_model});
  expert_out = reshape(expert_out, Shape{experts_unsplit, batch, cap, d_model});
  Tensor y = einsum({combine, expert_out}, x.shape());
  return {y, aux, combine};
}

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const Dimension& vocab,
                             const CrossEntropyOptions& options) {
  Tensor scaled = options.logit_scale == 1.0 ? logits : multiply(logits, options.logit_scale);
  return mtk::softmax_cross_entropy(scaled, targets, vocab.name, options.label_smoothing,
                                    options.z_loss);
}

}  // namespace mtk::layers
