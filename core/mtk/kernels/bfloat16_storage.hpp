#pragma once
// bfloat16 storage of variables and optimizer slots (DType::bfloat16): the slice is kept as bf16
// bit patterns, read as a float32 copy (exact) and written back rounded to nearest even (the
// rounding of kernels/bfloat16.hpp) or stochastically, so every kernel downstream computes in
// float32.

#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>
#include <vector>

namespace mtk::kernels {

/// bfloat16 bit patterns.
using BView = View<std::uint16_t>;

/// The float32 values of `stored` (exact: every bf16 value is a float32 value).
FView widen_bfloat16(const ExecSpace& space, const BView& stored);
/// `x` rounded to nearest even bf16, in a new View.
BView narrow_bfloat16(const ExecSpace& space, const FView& x);
/// In place: stored = bf16(x) when `accumulate` is 0, else bf16(float(stored) + accumulate * x)
/// (assign_add: +1, assign_sub: -1). Sizes must match.
void store_bfloat16(const ExecSpace& space, const FView& x, float accumulate, const BView& stored);
/// store_bfloat16 with stochastic rounding: a uniform random 16-bit value is added to the low
/// half of the float32 result's bits before truncation, so a value a fraction f of the way from
/// one bf16 value to the next rounds up with probability f (E[stored] = value; updates below half
/// an ulp are not lost). NaN and infinities are stored as by store_bfloat16. The bits of element k
/// depend only on (seed, counter, k's global row-major index in global_shape; `stored` is the
/// slice local_shape at `origin`), so every mesh and layout stores the same values.
void store_bfloat16_stochastic(const ExecSpace& space, const FView& x, float accumulate,
                               const BView& stored, const Shape& global_shape,
                               const Shape& local_shape, const std::vector<std::int64_t>& origin,
                               std::uint64_t seed, std::uint64_t counter);
/// How many values of `x` bf16 does not hold exactly (what narrow_bfloat16 would round).
std::int64_t count_inexact_bfloat16(const ExecSpace& space, const FView& x);

}  // namespace mtk::kernels
