#pragma once
// Contractions: einsum through KokkosBlas::gemm.
// (kernels/einsum.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/precision.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>
#include <string>

namespace mtk::kernels {

/// out = einsum over names: dims shared by the inputs and absent from out_shape are summed
/// (contracted); dims of one input only and absent from out_shape are summed first; out dims
/// present in both inputs are batch dims. Two operands go through KokkosBlas::gemm (strided batch
/// loop over batch dims), with no transpose copy when an operand's dim order already fits.
/// Precision::bfloat16: both operands rounded to bfloat16 (nearest even), products summed in
/// float32, the result float32; on the host through oneDNN's bf16 matmul where the CPU has a
/// native one, otherwise (and on GPUs, for now) emulated: rounded copies through the fp32 gemm.
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& b_shape,
             const FView& b, const Shape& out_shape, Precision precision = Precision::float32);
/// Host spaces with a BLAS library: operands and result are read and written in place whenever each
/// batch entry is a matrix with one row stride and contiguous rows (attention's
/// [batch, length, heads, d_kv] per (batch, heads)), via the BLAS leading dimensions, instead of
/// transposed copies. On by default; off (the copying path every backend has) with
/// set_einsum_in_place(false) or MTK_EINSUM_IN_PLACE=0. Results agree to float32 rounding.
void set_einsum_in_place(bool on);
/// One operand: sums the dims out_shape lacks and reorders the rest.
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& out_shape);
/// Multiply-add count of einsum(a, b) -> out: the product of the sizes of all distinct dims.
/// How bfloat16 contractions run on host execution spaces. automatic: oneDNN when it was built
/// in and picks a native (non-reference) bf16 matmul on this CPU, otherwise emulated.
enum class Bf16Gemm { automatic, onednn, emulate };
/// Forces a path (tests, benchmarks); the default comes from the environment variable
/// MTK_BF16_GEMM = auto | onednn | emulate. onednn without oneDNN in the build throws.
void set_bf16_gemm(Bf16Gemm path);
/// The path bf16 contractions take now: onednn or emulate (automatic resolved).
Bf16Gemm bf16_gemm();
/// One line saying how bf16 contractions run here, e.g. "oneDNN bf16 matmul (brg:avx512_core_amx)"
/// or "emulated: operands rounded to bf16 and multiplied by the fp32 gemm (oneDNN: ref:any)".
std::string bf16_gemm_description();
/// Whether bf16 contractions are emulated on the host, i.e. no faster than fp32 (the warning the
/// applications print once when a model runs in bf16).
bool bf16_gemm_is_emulated();

std::int64_t einsum_macs(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape);

}  // namespace mtk::kernels
