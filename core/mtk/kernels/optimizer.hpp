#pragma once
// Fused optimizer updates: one pass over a parameter and its slots (kernels/optimizer.cpp). An
// output (new_p, new_m, new_v) the caller passes holding as many values as the parameter is
// written into, and may be the input it replaces (each value is read before it is written): the
// in-place update of mtk/lower/in_place_updates.hpp. An empty one is allocated.

#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/view.hpp>

namespace mtk::kernels {

/// One fused Adam step (see mtk::adam_update); step_size is a one-element View.
void adam_update(const ExecSpace& space, const FView& p, const FView& m, const FView& v,
                 const FView& g, const FView& step_size, float beta1, float beta2, float epsilon,
                 FView& new_p, FView& new_m, FView& new_v);

/// Adafactor's full (unfactored) second moment and its update in one pass: v' = decay v +
/// (1 - decay) (g^2 + epsilon1), update = g / sqrt(v'); decay is a one-element View. The same
/// float operations, in the same order, as the elementwise formula in optim/adafactor.cpp.
void adafactor_second_moment(const ExecSpace& space, const FView& v, const FView& g,
                             const FView& decay, float epsilon1, FView& new_v, FView& update);
/// Adafactor's last step in one pass: s = update / clip * scale (clip, scale: one-element Views);
/// with momentum (beta1 > 0) m' = beta1 m + (1 - beta1) s and p' = p - m', else p' = p - s and
/// new_m stays empty.
void adafactor_apply(const ExecSpace& space, const FView& p, const FView& m, const FView& update,
                     const FView& clip, const FView& scale, double beta1, FView& new_p,
                     FView& new_m);

}  // namespace mtk::kernels
