#pragma once
// The Transformer's position-wise feed-forward layer.

#include <mtk/nn/layer_context.hpp>

#include <string>

namespace mtk::nn {

/// relu(x W1) W2 with a `d_ff` hidden dim (gelu when `gelu`); weights "<name>/wi", "<name>/wo".
Tensor dense_relu_dense(const LayerContext& ctx, const std::string& name, const Tensor& x,
                        const Dimension& d_model, const Dimension& d_ff, bool gelu = false);

}  // namespace mtk::nn
