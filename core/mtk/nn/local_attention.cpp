#include <mtk/base/error.hpp>
#include <mtk/nn/attention.hpp>
#include <mtk/nn/impl/weights.hpp>
#include <mtk/nn/local_attention.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/halo_exchange.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/softmax.hpp>
#include <mtk/ops/sources.hpp>

#include <vector>

namespace mtk::nn {
namespace {

constexpr const char* kWhere = "mtk::nn::local_self_attention";

void check_inputs(const Tensor& x, const Tensor& segments, const Dimension& d_model,
                  const std::string& length_dim, std::int64_t window, std::int64_t block) {
  if (!x.valid())
    fail(kWhere, "x is not a tensor");
  if (window < 1)
    fail(kWhere, cat("window ", window, " for ", x.shape().to_string(), " must be at least 1"));
  if (!x.shape().contains(length_dim) || !x.shape().contains(d_model.name))
    fail(kWhere, cat("'", x.name(), "' ", x.shape().to_string(), " lacks dimension '", length_dim,
                     "' or '", d_model.name, "'"));
  const std::int64_t length = x.shape().size_of(length_dim);
  if (block < 1 || block < window - 1)
    fail(kWhere, cat("block of ", block, " positions along '", length_dim, "' of '", x.name(), "' ",
                     x.shape().to_string(), " is narrower than the halo of window ", window,
                     " (window - 1 = ", window - 1, " positions); use a block of at least that"));
  if (length % block != 0)
    fail(kWhere, cat("dimension '", length_dim, "' of '", x.name(), "' ", x.shape().to_string(),
                     " has ", length, " positions, not a multiple of the block of ", block,
                     " (window ", window, ")"));
  if (segments.valid() &&
      (!segments.shape().contains(length_dim) || segments.shape().size_of(length_dim) != length))
    fail(kWhere, cat("segment ids ", segments.shape().to_string(), " lack dimension '", length_dim,
                     "' of size ", length, " of '", x.name(), "'"));
}

}  // namespace

Tensor local_attention_bias(Graph& g, const Dimension& blocks, const Dimension& block,
                            std::int64_t window, const Tensor& segments) {
  const std::int64_t halo = window - 1;
  // Global positions: query (b, i) is b * block + i; the widened block's offset m holds key
  // b * block + m - halo, or the fill (window or more before every query) before the start.
  Tensor query = add(multiply(cast(range(g, blocks), DType::float32), double(block.size)),
                     cast(range(g, block), DType::float32));
  Tensor key = rename_dimension(halo_exchange(query, blocks.name, block.name, halo, 0,
                                              HaloBoundary::zero, -double(window) - 1.0),
                                block.name, kLocalMemoryDim);
  Tensor distance = query - key;  // [blocks, block, memory]: how far back the key is
  Tensor outside = less(distance, constant(g, Shape(), 0.0)) +
                   greater(distance, constant(g, Shape(), double(window) - 0.5));
  Tensor bias = multiply(outside, -1e9);
  if (segments.valid()) {
    Tensor qs = cast(segments, DType::float32);
    Tensor ks = rename_dimension(
        halo_exchange(qs, blocks.name, block.name, halo, 0, HaloBoundary::zero, -1.0), block.name,
        kLocalMemoryDim);
    bias = bias + multiply(add(negative(equal(qs, ks)), 1.0), -1e9);
  }
  return bias;
}

Tensor local_self_attention(const LayerContext& ctx, const std::string& name, const Tensor& x,
                            const Tensor& segments, const Dimension& d_model,
                            const Dimension& heads, const Dimension& d_kv,
                            const std::string& length_dim, std::int64_t window,
                            std::int64_t block) {
  check_inputs(x, segments, d_model, length_dim, window, block);
  Graph& g = *ctx.graph;
  g.offer_split(heads.name);
  // Sequence parallelism: only a halo of the window crosses a split of the length.
  g.offer_split(length_dim);
  const Dimension length = x.shape().dim(length_dim);
  // [.., length, ..] -> [.., length = blocks, attention_block, ..]: the blocks dim keeps the
  // length's name, and so its layout rule and split (a local reshape).
  const Dimension blocks{length_dim, length.size / block}, within{kLocalBlockDim, block};
  auto blocked = [&](const Tensor& t) {
    return replace_dimensions(t, {length_dim}, {blocks, within});
  };
  auto widened = [&](const Tensor& t) {  // the window - 1 positions before each block, in front
    return rename_dimension(halo_exchange(t, length_dim, kLocalBlockDim, window - 1, 0),
                            kLocalBlockDim, kLocalMemoryDim);
  };
  Tensor q = blocked(attention_projection(ctx, name, "q", x, d_model, heads, d_kv));
  Tensor k = widened(blocked(attention_projection(ctx, name, "k", x, d_model, heads, d_kv)));
  Tensor v = widened(blocked(attention_projection(ctx, name, "v", x, d_model, heads, d_kv)));
  // logits [batch..., blocks, heads, attention_block, attention_memory]
  std::vector<Dimension> ld;
  for (const auto& d : q.shape().dims())
    if (d.name != kLocalBlockDim && d.name != heads.name && d.name != d_kv.name)
      ld.push_back(d);
  ld.push_back(heads);
  ld.push_back(within);
  ld.push_back(k.shape().dim(kLocalMemoryDim));
  Tensor logits = einsum({q, k}, Shape(ld));
  Tensor bias = local_attention_bias(g, blocks, within, window,
                                     segments.valid() ? blocked(segments) : Tensor());
  logits = binary(BinaryFn::add, logits, bias, nullptr);
  if (logits.shape() != Shape(ld))
    logits = einsum({logits}, Shape(ld));
  Tensor weights = ctx.dropout(softmax(logits, kLocalMemoryDim), name + "/dropout");
  Tensor o = einsum({weights, v}, q.shape());
  o = replace_dimensions(o, {length_dim, kLocalBlockDim}, {length});
  Tensor wo = impl::weight(g, name + "/o", Shape{heads, d_kv, d_model}, heads.size * d_kv.size);
  return einsum({o, wo}, x.shape());
}

}  // namespace mtk::nn
