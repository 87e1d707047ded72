#pragma once
// Contractions: einsum through the fastest matrix product the build has (host BLAS, oneDNN,
// Kokkos Kernels).
// (kernels/einsum.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/precision.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/bf16_copies.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>
#include <string>

namespace mtk::kernels {

/// out = einsum over names: dims shared by the inputs and absent from out_shape are summed
/// (contracted); dims of one input only and absent from out_shape are summed first; out dims
/// present in both inputs are batch dims. Two operands go through a gemm (fp32_gemm(): oneDNN's
/// matmul or the host BLAS / KokkosBlas::gemm), with no transpose copy when an operand's memory
/// order already fits.
/// Precision::bfloat16: both operands rounded to bfloat16 (nearest even), products summed in
/// float32, the result float32; on the host through oneDNN's bf16 matmul where the CPU has a
/// native one, otherwise (and on GPUs, for now) emulated: rounded copies through the fp32 gemm.
/// `reuse` (oneDNN bf16 path): the bf16 copy of an operand is taken from reuse->copies when there
/// and, where keep_a / keep_b, the copy made is left there (kernels/bf16_copies.hpp).
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& b_shape,
             const FView& b, const Shape& out_shape, Precision precision = Precision::float32,
             const Bf16Reuse* reuse = nullptr);
/// Host spaces with a BLAS library: operands and result are read and written in place whenever each
/// batch entry is a matrix with one row stride and contiguous rows (attention's
/// [batch, length, heads, d_kv] per (batch, heads)), via the BLAS leading dimensions, instead of
/// transposed copies. On by default; off (the copying path every backend has) with
/// set_einsum_in_place(false) or MTK_EINSUM_IN_PLACE=0. Results agree to float32 rounding.
void set_einsum_in_place(bool on);
/// One operand: sums the dims out_shape lacks and reorders the rest.
FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& out_shape);
/// How bfloat16 contractions run. automatic: on a GPU the vendor BLAS's bf16 matmul (cuBLAS on
/// Kokkos' CUDA space, rocBLAS on its HIP space, impl/gpu_blas.hpp) on the matrix cores; on the
/// host oneDNN when it was built in and picks a native (non-reference) bf16 matmul on this CPU;
/// otherwise emulated (operands rounded to bf16 values, the fp32 gemm). All multiply the same bf16
/// values and accumulate in float32.
enum class Bf16Gemm { automatic, onednn, emulate, gpu_blas };
/// Forces a path (tests, benchmarks); the default comes from the environment variable
/// MTK_BF16_GEMM = auto | onednn | emulate | gpu_blas (cublas: the same, its earlier name). A path
/// this build lacks throws.
void set_bf16_gemm(Bf16Gemm path);
/// The path bf16 contractions take now: onednn, emulate or gpu_blas (automatic resolved).
Bf16Gemm bf16_gemm();
/// One line saying how bf16 contractions run here, e.g. "oneDNN bf16 matmul (brg:avx512_core_amx)"
/// or "emulated: operands rounded to bf16 and multiplied by the fp32 gemm (oneDNN: ref:any)".
std::string bf16_gemm_description();
/// Back to the run-time option (MTK_BF16_GEMM) after set_bf16_gemm.
void reset_bf16_gemm();

/// How float32 contractions run on host execution spaces. automatic: oneDNN's f32 matmul where it
/// runs its brgemm kernels (AVX-512 CPUs: the faster library there), for each product it has
/// brgemm kernels for; the host BLAS otherwise. onednn: oneDNN for every product it can run
/// (not its reference code); blas: the host BLAS / Kokkos Kernels. Results agree to float32
/// rounding. Set with MTK_FP32_GEMM = auto | onednn | blas or set_fp32_gemm (tests, benchmarks).
enum class Fp32Gemm { automatic, onednn, blas };
void set_fp32_gemm(Fp32Gemm path);
/// Back to the run-time option (MTK_FP32_GEMM) after set_fp32_gemm.
void reset_fp32_gemm();
/// The path float32 contractions take now: onednn or blas (automatic resolved).
Fp32Gemm fp32_gemm();
/// One line saying how float32 contractions run here, e.g. "oneDNN f32 matmul (brg:avx512_core);
/// products it has no brgemm kernel for: OpenBLAS (Haswell kernels)".
std::string fp32_gemm_description();
/// The host BLAS behind Kokkos Kernels, e.g. "OpenBLAS (Haswell kernels)".
std::string host_blas_name();

/// Whether bf16 contractions are emulated on the host, i.e. no faster than fp32 (the warning the
/// applications print once when a model runs in bf16).
bool bf16_gemm_is_emulated();
/// Whether bf16 contractions convert their operands to bf16 storage here at their sources
/// (oneDNN's native bf16 matmul; on a GPU cuBLAS with operands in place), i.e. whether kept copies
/// (Bf16Reuse) save anything.
bool bf16_copies_used();

/// The bytes einsum(a, b) -> out reads and writes besides its gemm's own operand reads and result
/// writes, on the body it takes now: 8 per element copied (an operand summed over a dim of its own
/// first, an operand copied into the gemm's order, a result made in another order and permuted),
/// and for a batched vector product (elementwise work, no gemm) 4 per element of the operands and
/// the output. The cost model prices them at the calibrated `einsum` rate.
std::int64_t einsum_moved_bytes(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape,
                                Precision precision = Precision::float32);

/// Multiply-add count of einsum(a, b) -> out: the product of the sizes of all distinct dims.
std::int64_t einsum_macs(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape);

}  // namespace mtk::kernels
