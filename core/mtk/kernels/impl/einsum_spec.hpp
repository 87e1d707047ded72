#pragma once
// einsum's dispatch layer (kernels/einsum/dispatch.cpp), as Kokkos Kernels' *_spec.hpp: the one
// place that decides which body multiplies a planned contraction, and the bodies' entry points
// (one file each under kernels/einsum/).
//
//   host_blas_in_place   einsum/host_blas_in_place.cpp: the host BLAS's sgemm per batch entry,
//                        operands and result read and written in place through leading dims
//   packed_kokkos_gemm   einsum/packed.cpp: operands copied into [batch][M][K] / [batch][K][N]
//                        order where they are not stored so, KokkosBlas::gemm per batch entry
//   packed_onednn        einsum/packed.cpp: the same packing, one batched oneDNN bf16 matmul
//                        (kernels/onednn_matmul.cpp)
// bfloat16 operands are rounded before any of them (einsum/bf16_operands.cpp), so every body
// multiplies the same bf16 values.

#include <mtk/base/exec_space.hpp>
#include <mtk/base/precision.hpp>
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

enum class Backend { host_blas_in_place, packed_kokkos_gemm, packed_onednn };

/// The body a two-operand contraction in `precision` takes here and now: oneDNN for bf16 where
/// bf16_gemm() says so (host memory only), else the host BLAS in place where it is built in and
/// not switched off (set_einsum_in_place, MTK_EINSUM_IN_PLACE), else the packed KokkosBlas gemm.
Backend choose_backend(Precision precision);

/// a x b -> out through `backend` (a plan with nb, m, n, k > 0 and no elementwise special case).
FView contract(const ExecSpace& space, Backend backend, const Operand& a, const Operand& b,
               const Shape& out_shape, const Plan& plan, const Sizes& sizes);

// ---------------------------------------------------------------- bodies

/// The host BLAS in place (only where Kokkos Kernels has a BLAS TPL; host memory).
FView host_blas_in_place(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                         const Plan& plan, const Sizes& sizes);
/// Packed operands, then KokkosBlas::gemm per batch entry (onednn false) or one batched oneDNN
/// matmul (onednn true; host memory).
FView packed_gemm(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                  const Plan& plan, const Sizes& sizes, bool onednn);
/// Both operands rounded to bf16 values once, kept as floats (emulated bf16; host buffers reused
/// from call to call).
void round_operands_to_bf16(const ExecSpace& space, Operand& a, Operand& b);

}  // namespace mtk::kernels::einsum_impl
