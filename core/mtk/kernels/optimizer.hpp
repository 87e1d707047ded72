#pragma once
// Fused optimizer updates: one pass over a parameter and its slots (kernels/optimizer.cpp).

#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/view.hpp>

namespace mtk::kernels {

/// One fused Adam step (see mtk::adam_update); step_size is a one-element View.
void adam_update(const ExecSpace& space, const FView& p, const FView& m, const FView& v,
                 const FView& g, const FView& step_size, float beta1, float beta2, float epsilon,
                 FView& new_p, FView& new_m, FView& new_v);

}  // namespace mtk::kernels
