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

/// Row statistics of this slice in one read of the logits, packed as 4 x rows values: the slice's
/// max m, sum_j exp(x[row, j] - m), the target logit x[row, target[row]] when the target falls in
/// this slice (else 0) and sum_j x[row, j].
FView cross_entropy_stats(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                          const IView& targets, std::int64_t origin);
/// Vocabulary split: rebases the slice's statistics (in place) on the max over all slices,
/// `global_max` (rows values): s *= exp(m - M), m = M; the sums can then be allreduced.
void cross_entropy_rebase(const ExecSpace& space, FView& stats, const FView& global_max);
/// From the statistics of the whole vocabulary: lse = m + log(s) and
/// loss = lse - (1 - ls) x_t - ls / V sum_j x_j + z lse^2, elementwise over rows.
void cross_entropy_from_stats(const ExecSpace& space, const FView& stats, double label_smoothing,
                              std::int64_t vocab_size, double z_loss, FView& loss, FView& lse);
/// d loss / d x[row, j] = dy[row] (p_j (1 + 2 z lse) - (1 - ls) [j == t] - ls / V), p = exp(x -
/// lse), written in one pass over the logits: into `into` when given (x's size; x itself
/// allowed, each value is read before it is written). `bf16_into`: the gradient's bf16 bit
/// patterns too. `bits_only`: only those bit patterns, in the first half of the output's own
/// storage (no float32 values; bf16_into unused): a bf16 contraction's operand in half the bytes.
FView cross_entropy_grad(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                         const IView& targets, std::int64_t origin, const FView& lse,
                         const FView& dy, double label_smoothing, std::int64_t vocab_size,
                         double z_loss, const FView& into = {},
                         const View<std::uint16_t>& bf16_into = {}, bool bits_only = false);

}  // namespace mtk::kernels
