#pragma once
// Normalisation layers over one named dimension.

#include <mtk/nn/layer_context.hpp>

#include <string>

namespace mtk::nn {

/// Layer norm over `dim` with learned scale and bias ("<name>/scale", "<name>/bias").
Tensor layer_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                  const std::string& dim, double epsilon = 1e-6);
/// RMS norm over `dim` with learned scale (T5 / Mesh-TF "rms_norm").
Tensor rms_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                const std::string& dim, double epsilon = 1e-6);

}  // namespace mtk::nn
