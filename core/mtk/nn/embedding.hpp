#pragma once
// Token embedding.

#include <mtk/nn/layer_context.hpp>

#include <string>

namespace mtk::nn {

/// Token embedding: table `name` [vocab, d_model] gathered at `ids`.
Tensor embedding(const LayerContext& ctx, const std::string& name, const Tensor& ids,
                 const Dimension& vocab, const Dimension& d_model);

}  // namespace mtk::nn
