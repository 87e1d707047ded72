#pragma once
// Fused normalisation ops.

#include <mtk/graph/graph.hpp>

#include <string>

namespace mtk {

/// Layer norm of x over `dim`: (x - mean) / sqrt(var + epsilon) * scale + bias, mean and (biased)
/// variance over `dim`; scale and bias have the shape [dim]. One fused op (a few passes over x
/// instead of eight elementwise ops) with a fused gradient; `dim` may be split over a mesh dim.
Tensor layer_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, const std::string& dim,
                  double epsilon);

}  // namespace mtk
