#pragma once
// Fused optimizer updates: one pass over a parameter and its slots (Adam; Adafactor's elementwise
// parts, around its graph reductions).

#include <mtk/graph/graph.hpp>

#include <vector>

namespace mtk {

/// One fused Adam step for a parameter: {new parameter, new first moment, new second moment} with
/// m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g^2, p' = p - step_size m' / (sqrt(v') + eps), in
/// one pass over the four tensors (step_size: a scalar tensor). Assign the results to apply them.
std::vector<Tensor> adam_update(const Tensor& param, const Tensor& m, const Tensor& v,
                                const Tensor& grad, const Tensor& step_size, double beta1,
                                double beta2, double epsilon);

/// Adafactor's unfactored second moment and update in one pass: {v', update} with v' = decay v +
/// (1 - decay) (g^2 + epsilon1) and update = g / sqrt(v') (decay: a scalar tensor).
std::vector<Tensor> adafactor_second_moment(const Tensor& v, const Tensor& grad,
                                            const Tensor& decay, double epsilon1);

/// Adafactor's last step in one pass: s = update / clip * scale (clip, scale: scalar tensors); with
/// momentum (beta1 > 0, m a tensor) {p - m', m'} with m' = beta1 m + (1 - beta1) s, else {p - s}
/// (m unused). Assign the results to apply them.
std::vector<Tensor> adafactor_apply(const Tensor& param, const Tensor& m, const Tensor& update,
                                    const Tensor& clip, const Tensor& scale, double beta1);

}  // namespace mtk
