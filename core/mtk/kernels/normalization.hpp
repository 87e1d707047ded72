#pragma once
// Fused layer norm: row statistics, normalisation with scale and bias, and the gradient, each in
// one pass over the rows (kernels/normalization.cpp; conventions in kernels/view.hpp).

#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

namespace mtk::kernels {

// Rows are the positions of every dim but `dim` (the normalised one); row tensors have the shape
// without `dim`, in the same order. With `dim` split, each rank sums over its slice and the
// lowering allreduces the sums; `d_total` is the size of the whole dim.

/// Per row: sum_j x[row, j] when `row_sum` is empty, else sum_j (x[row, j] - mean)^2 with mean =
/// row_sum[row] / d_total.
FView layer_norm_sums(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                      const FView& row_sum, std::int64_t d_total);
/// Per row, from the sums of x and of the centred squares: mean and rstd = 1 / sqrt(var + eps).
void layer_norm_moments(const ExecSpace& space, const FView& row_sum, const FView& row_sq,
                        std::int64_t d_total, double epsilon, FView& mean, FView& rstd);
/// y = (x - mean) rstd scale + bias; scale and bias hold the slice of `dim`.
FView layer_norm_apply(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                       const FView& mean, const FView& rstd, const FView& scale, const FView& bias);
/// Per row, packed as 2 x rows values: sum_j dy scale and sum_j dy scale xhat, xhat = (x - mean)
/// rstd.
FView layer_norm_grad_sums(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                           const FView& mean, const FView& rstd, const FView& scale,
                           const FView& dy);
/// From the (whole-row) sums: dx = rstd (dy scale - sum1 / D - xhat sum2 / D), and dy xhat (summed
/// over rows by the lowering for the gradient of the scale).
void layer_norm_grad_apply(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                           const FView& mean, const FView& rstd, const FView& scale,
                           const FView& dy, const FView& sums, std::int64_t d_total, FView& dx,
                           FView& dy_xhat);

}  // namespace mtk::kernels
