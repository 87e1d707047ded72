#pragma once
// Fused softmax cross-entropy.
// (kernels/loss.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

namespace mtk::kernels {

// Rows are the positions of every dim but `dim` (the vocabulary); row tensors have the shape
// without `dim`, in the same order. With the vocabulary split, each rank computes partial
// statistics of its slice (vocabulary positions origin .. origin + local size) and the lowering
// combines them with allreduces.

/// sum_j exp(x[row, j] - shift[row]) over this slice.
FView sum_exp_shifted(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                      const FView& shift);
/// x[row, target[row]] when the target falls in this slice (else 0) and sum_j x[row, j].
void target_logit_and_sum(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                          const IView& targets, std::int64_t origin, FView& target_logit,
                          FView& logit_sum);
/// loss = lse - (1 - ls) x_t - ls / V sum_j x_j + z lse^2, elementwise over rows.
FView cross_entropy_from_stats(const ExecSpace& space, const FView& lse, const FView& target_logit,
                               const FView& logit_sum, double label_smoothing,
                               std::int64_t vocab_size, double z_loss);
/// d loss / d x[row, j] = dy[row] (p_j (1 + 2 z lse) - (1 - ls) [j == t] - ls / V), p = exp(x -
/// lse).
FView cross_entropy_grad(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                         const IView& targets, std::int64_t origin, const FView& lse,
                         const FView& dy, double label_smoothing, std::int64_t vocab_size,
                         double z_loss);

}  // namespace mtk::kernels
