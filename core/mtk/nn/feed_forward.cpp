#include <mtk/nn/feed_forward.hpp>
#include <mtk/nn/impl/weights.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/sources.hpp>

namespace mtk::nn {

Tensor dense_relu_dense(const LayerContext& ctx, const std::string& name, const Tensor& x,
                        const Dimension& d_model, const Dimension& d_ff, bool use_gelu) {
  using impl::replace_dims;
  using impl::weight;
  Graph& g = *ctx.graph;
  g.offer_split(d_ff.name);  // Megatron's split of the hidden layer
  Tensor wi = weight(g, name + "/wi", Shape{d_model, d_ff}, d_model.size);
  Tensor wo = weight(g, name + "/wo", Shape{d_ff, d_model}, d_ff.size);
  Tensor h = einsum({x, wi}, replace_dims(x.shape(), {d_model.name}, {d_ff}));
  h = use_gelu ? gelu(h) : relu(h);
  h = ctx.dropout(h, name + "/dropout");
  return einsum({h, wo}, x.shape());
}

}  // namespace mtk::nn
