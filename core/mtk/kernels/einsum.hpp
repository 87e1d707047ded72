#pragma once
// Contractions: einsum through KokkosBlas::gemm.
// (kernels/einsum.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

namespace mtk::kernels {

/// out = einsum over names: dims shared by the inputs and absent from out_shape are summed
/// (contracted); dims of one input only and absent from out_shape are summed first; out dims
/// present in both inputs are batch dims. Two operands go through KokkosBlas::gemm (strided batch
/// loop over batch dims), with no transpose copy when an operand's dim order already fits.
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& b_shape,
             const FView& b, const Shape& out_shape);
/// One operand: sums the dims out_shape lacks and reorders the rest.
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& out_shape);
/// Multiply-add count of einsum(a, b) -> out: the product of the sizes of all distinct dims.
std::int64_t einsum_macs(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape);

}  // namespace mtk::kernels
