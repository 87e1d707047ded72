#include <mtk/nn/embedding.hpp>
#include <mtk/ops/ops.hpp>

namespace mtk::nn {

Tensor embedding(const LayerContext& ctx, const std::string& name, const Tensor& ids,
                 const Dimension& vocab, const Dimension& d_model) {
  ctx.graph->offer_split(vocab.name);  // a split table gathers locally and sums the rows
  Tensor table = variable(*ctx.graph, name, Shape{vocab, d_model}, Initializer::normal(1.0f));
  return gather(table, ids, vocab.name);
}

}  // namespace mtk::nn
