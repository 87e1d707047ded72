#pragma once
// einsum's in-place arrangement (kernels/einsum/in_place.cpp), shared by the bodies that take
// strided operands (the host BLAS, oneDNN): each operand and the result seen per batch entry as a
// row-major matrix whose rows lie `ld` apart, read and written where they lie when the dims allow,
// else through a transposed copy.

#include <mtk/kernels/impl/einsum_plan.hpp>
#include <mtk/kernels/impl/index.hpp>

#include <cstdint>

namespace mtk::kernels::einsum_impl {

/// One operand of a batched product seen in place: per batch entry, a row-major matrix whose rows
/// (one collapsed group of dims) lie `ld` apart and whose columns (another group) are contiguous.
/// Attention operands such as q [batch, length, heads, d_kv] are matrices [length][d_kv] with
/// ld = heads * d_kv for each (batch, heads).
struct InPlace {
  std::int64_t ld = 1;
  IndexMap batch;  ///< batch entry (row-major over the plan's batch dims) -> element offset
};

/// A contraction arranged for a strided gemm: a is [M][K] (ta 'N') or [K][M] ('T') per batch
/// entry, b [K][N] ('N') or [N][K] ('T'); the result is written as [M][N] into a buffer of
/// `c_shape`, or as [N][M] when `swapped` (computed as C^T = B^T A^T). When c_shape differs from
/// the output shape the caller transposes the result into it.
struct InPlaceProduct {
  char ta = 'N', tb = 'N';
  InPlace ia, ib, ic;
  bool swapped = false;
  Shape c_shape;
};

/// Whether arrange_in_place reads operand a (b where `second`) where it lies, without a copy.
bool stays_in_place(const Shape& a, const Shape& b, const Plan& plan, const Sizes& sizes,
                    bool second);

/// Whether arrange_in_place writes the result where it lies ([M][N] or [N][M] per batch entry),
/// not into a temporary [batch][M][N] transposed after.
bool result_in_place(const Shape& out, const Plan& plan, const Sizes& sizes);

/// Arranges a x b -> out_shape: K in the order that lets more operands stay in place, operands
/// copied (a.x / b.x and shapes replaced) only where neither order of theirs is in place.
InPlaceProduct arrange_in_place(const ExecSpace& space, Operand& a, Operand& b,
                                const Shape& out_shape, const Plan& plan, const Sizes& sizes);

}  // namespace mtk::kernels::einsum_impl
