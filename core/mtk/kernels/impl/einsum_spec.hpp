#pragma once
// einsum's dispatch layer (kernels/einsum/dispatch.cpp), as Kokkos Kernels' *_spec.hpp: the one
// place that decides which body multiplies a planned contraction, and the bodies' entry points
// (one file each under kernels/einsum/).
//
//   host_blas_in_place   einsum/host_blas_in_place.cpp: the host BLAS's sgemm per batch entry,
//                        operands and result read and written in place through leading dims
//   packed_kokkos_gemm   einsum/packed.cpp: operands copied into [batch][M][K] / [batch][K][N]
//                        order where they are not stored so, KokkosBlas::gemm per batch entry
//                        (on a GPU one strided-batched GPU BLAS call, impl/gpu_blas.hpp,
//                        in bf16 on the matrix cores where bf16_gemm() is gpu_blas)
//   onednn_in_place      einsum/onednn_in_place.cpp: one oneDNN matmul (f32 or bf16) with every
//                        operand read in place through its strides (kernels/onednn_matmul.cpp)
//   gpu_blas_in_place      einsum/gpu_blas_in_place.cpp: on a GPU one pointer-batched GPU BLAS
//                        call (sgemm, or bf16 on the tensor cores) with operands and result in
//                        place through leading dims, as host_blas_in_place
// bfloat16 operands are rounded before the fp32 bodies (einsum/bf16_operands.cpp) and converted to
// bf16 storage by the oneDNN and GPU BLAS bf16 bodies: every body multiplies the same bf16 values.
// `into` (einsum_accumulate): a body whose result lies in out's order adds the product into it
// (gemm beta = 1, oneDNN's sum post-op) and returns it; otherwise it returns a new result and the
// entry adds that.

#include <mtk/base/exec_space.hpp>
#include <mtk/base/precision.hpp>
#include <mtk/kernels/bf16_copies.hpp>
#include <mtk/kernels/impl/einsum_plan.hpp>

#include <KokkosKernels_config.h>

namespace mtk::kernels::einsum_impl {

/// Whether Kokkos Kernels has a host BLAS library (a BLAS TPL, e.g. OpenBLAS) behind
/// KokkosBlas::Impl::HostBlas: host_blas_in_place exists only then.
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
constexpr bool have_host_blas = true;
#else
constexpr bool have_host_blas = false;
#endif

enum class Backend { host_blas_in_place, packed_kokkos_gemm, onednn_in_place, gpu_blas_in_place };

/// The body a two-operand contraction in `precision` takes here and now: on a GPU the GPU BLAS
/// in place unless in place is switched off (set_einsum_in_place, MTK_EINSUM_IN_PLACE); on the
/// host oneDNN where bf16_gemm() / fp32_gemm() say so, else the host BLAS in place where it is
/// built in and not switched off; else the packed KokkosBlas gemm (GPU BLAS strided-batched). A
/// product oneDNN declines (its reference code; under fp32 `automatic`, any kernel but its brgemm)
/// takes the host BLAS / packed path instead, decided in contract().
Backend choose_backend(Precision precision);

/// Where the oneDNN and GPU BLAS in-place bf16 bodies find and keep operand copies
/// (kernels/bf16_copies.hpp): only for an operand still at its source address (no presum or
/// transposed copy in between).
struct Sources {
  const Bf16Reuse* reuse = nullptr;
  const float *a = nullptr, *b = nullptr;  // the caller's operands
};

/// Whether `backend` converts bf16 operands to bf16 storage itself (oneDNN; the GPU BLAS bodies
/// where bf16_gemm() is gpu_blas), so they reach it unrounded.
bool converts_bf16_operands(Backend backend);

/// a x b -> out through `backend` (a plan with nb, m, n, k > 0 and no elementwise special case).
/// bf16 operands arrive rounded except on the oneDNN body (which converts them itself).
FView contract(const ExecSpace& space, Backend backend, const Operand& a, const Operand& b,
               const Shape& out_shape, const Plan& plan, const Sizes& sizes, Precision precision,
               const Sources& sources = {}, const FView& into = {});

// ---------------------------------------------------------------- bodies

/// The host BLAS in place (only where Kokkos Kernels has a BLAS TPL; host memory).
FView host_blas_in_place(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                         const Plan& plan, const Sizes& sizes, const FView& into = {});
/// Packed operands, then KokkosBlas::gemm per batch entry (any execution space; the GPU BLAS on a
/// GPU). bf16: the operands go to the GPU BLAS's bf16 matmul as bf16 storage (GPU builds only).
FView packed_gemm(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                  const Plan& plan, const Sizes& sizes, const FView& into = {}, bool bf16 = false);
/// One pointer-batched GPU BLAS call on the operands in place (CUDA / HIP builds with cuBLAS /
/// rocBLAS; elsewhere it fails).
/// bf16: the operands converted to bf16 storage whole (or their kept copies, `sources`), the
/// product on the tensor cores.
FView gpu_blas_in_place(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                        const Plan& plan, const Sizes& sizes, const FView& into, bool bf16,
                        const Sources& sources = {});
/// One oneDNN matmul on the operands in place (host memory): true with the result in `out`, or
/// false when oneDNN declines the product (no descriptor, its reference code, or not its brgemm
/// kernels when `only_brgemm`); a and b are left arranged (impl/einsum_in_place.hpp) either way,
/// and rounded to bf16 values where a bf16 product runs in f32 (no bf16 matmul on this CPU).
bool onednn_in_place(const ExecSpace& space, Operand& a, Operand& b, const Shape& out_shape,
                     const Plan& plan, const Sizes& sizes, Precision precision, bool only_brgemm,
                     FView& out, const Sources& sources = {}, const FView& into = {});
/// An operand whose float32 values are gone (only its kept bf16 copy holds them,
/// Bf16Copies::values_gone, e.g. the logits' gradient written as bits alone) made float32 again
/// from the copy (exact; a new buffer), for a body that would read its floats. Others unchanged.
void restore_gone_values(const ExecSpace& space, Operand& op, const Bf16Reuse* reuse);
/// Both operands rounded to bf16 values once, kept as floats (emulated bf16; host buffers reused
/// from call to call).
void round_operands_to_bf16(const ExecSpace& space, Operand& a, Operand& b);

}  // namespace mtk::kernels::einsum_impl
