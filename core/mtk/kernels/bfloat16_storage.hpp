#pragma once
// bfloat16 storage of variables and optimizer slots (DType::bfloat16): the slice is kept as bf16
// bit patterns, read as a float32 copy (exact) and written back rounded to nearest even (the
// rounding of kernels/bfloat16.hpp), so every kernel downstream computes in float32.

#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

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
/// How many values of `x` bf16 does not hold exactly (what narrow_bfloat16 would round).
std::int64_t count_inexact_bfloat16(const ExecSpace& space, const FView& x);

}  // namespace mtk::kernels
