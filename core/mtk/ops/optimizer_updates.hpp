#pragma once
// Fused optimizer updates: one pass over a parameter and its slots.

#include <mtk/graph/graph.hpp>

#include <vector>

namespace mtk {

/// One fused Adam step for a parameter: {new parameter, new first moment, new second moment} with
/// m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2, p' = p - step_size m' / (sqrt(v') + eps), in
/// one pass over the four tensors (step_size: a scalar tensor). Assign the results to apply them.
std::vector<Tensor> adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                                const Tensor& grad, const Tensor& step_size, double beta1,
                                double beta2, double epsilon);

}  // namespace mtk
