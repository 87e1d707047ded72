#include <mtk/base/error.hpp>
#include <mtk/nn/embedding.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/sources.hpp>

namespace mtk::nn {

Tensor embedding(const LayerContext& ctx, const std::string& name, const Tensor& ids,
                 const Dimension& vocab, const Dimension& d_model) {
  ctx.graph->offer_split(vocab.name);  // a split table gathers locally and sums the rows
  Graph& g = *ctx.graph;
  // A table another embedding already made (shared embeddings) is read again, not made twice.
  Tensor table = g.has_variable(name)
                     ? g.variable(name)
                     : variable(g, name, Shape{vocab, d_model}, Initializer::normal(1.0f));
  if (table.shape() != Shape{vocab, d_model})
    fail("mtk::nn::embedding", cat("variable '", name, "' is ", table.shape().to_string(), ", not ",
                                   Shape{vocab, d_model}.to_string()));
  return gather(table, ids, vocab.name);
}

}  // namespace mtk::nn
