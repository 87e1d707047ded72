#pragma once
// Batched matrix products through the GPU vendor's BLAS: cuBLAS on Kokkos' CUDA space
// (kernels/cublas_gemm.cpp), rocBLAS on its HIP space (kernels/rocblas_gemm.cpp), each where Kokkos
// Kernels was built with that library. Row-major float32 or bfloat16 operands in device memory,
// one strided-batched (or pointer-batched) call per product on the execution space's stream,
// float32 accumulation and result. No vendor type appears here; in a build without one every call
// but gpu_blas_available(), gpu_blas_vendor() and gpu_blas_name() fails
// (kernels/gpu_blas_none.cpp).

#include <mtk/base/exec_space.hpp>

#include <KokkosKernels_config.h>

#include <cstdint>
#include <string>
#include <type_traits>

namespace mtk::kernels::impl {

/// Whether MTK's kernels run on a GPU space whose vendor BLAS Kokkos Kernels was built with
/// (CUDA + cuBLAS, HIP + rocBLAS), where contractions go through that library.
constexpr bool gpu_blas_available() {
#if defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
  return std::is_same_v<ExecSpace, Kokkos::Cuda>;
#elif defined(KOKKOS_ENABLE_HIP) && defined(KOKKOSKERNELS_ENABLE_TPL_ROCBLAS)
  return std::is_same_v<ExecSpace, Kokkos::HIP>;
#else
  return false;
#endif
}

/// "cuBLAS", "rocBLAS", or "" where gpu_blas_available() is false.
constexpr const char* gpu_blas_vendor() {
  if (!gpu_blas_available())
    return "";
#if defined(KOKKOS_ENABLE_HIP)
  return "rocBLAS";
#else
  return "cuBLAS";
#endif
}

/// c_i = op(a_i) op(b_i) + beta c_i for i < nb. Every matrix is row-major and packed, one after
/// another: a_i is [m][k] ('N') or [k][m] ('T') at a + i m k, b_i [k][n] ('N') or [n][k] ('T') at
/// b + i k n, c_i [m][n] at c + i m n.
struct BatchedGemm {
  char ta = 'N', tb = 'N';
  std::int64_t nb = 1, m = 0, n = 0, k = 0;
  float beta = 0.0f;
};

/// `g` on float32 operands (sgemm: float32 arithmetic, no TF32 / XF32).
void gpu_blas_gemm(const ExecSpace& space, const BatchedGemm& g, const float* a, const float* b,
                   float* c);
/// `g` on bfloat16 operands (bit patterns) on the matrix cores, float32 accumulation and result.
void gpu_blas_gemm_bf16(const ExecSpace& space, const BatchedGemm& g, const std::uint16_t* a,
                        const std::uint16_t* b, float* c);
/// nb column-major products C_i = op(A_i) op(B_i) + beta C_i as a column-major sgemm takes them
/// (the caller has made BLAS's view of its row-major matrices, as for the host BLAS), each matrix
/// anywhere: their addresses are device arrays of nb pointers, so operands with two batch dims at
/// different strides (attention's [batch, length, heads, d_kv]) are read in place.
struct PointerGemm {
  char ta = 'N', tb = 'N';
  std::int64_t m = 0, n = 0, k = 0, lda = 1, ldb = 1, ldc = 1, nb = 1;
  float beta = 0.0f;
};

/// `g` on float32 matrices (sgemm, batched by pointers).
void gpu_blas_gemm_pointers(const ExecSpace& space, const PointerGemm& g, const float* const* a,
                            const float* const* b, float* const* c);
/// `g` on bfloat16 matrices (bit patterns) on the matrix cores, float32 accumulation and result.
void gpu_blas_gemm_pointers_bf16(const ExecSpace& space, const PointerGemm& g,
                                 const std::uint16_t* const* a, const std::uint16_t* const* b,
                                 float* const* c);
/// "cuBLAS <version> on <GPU name> (sm_<cc>)", "rocBLAS <version> on <GPU name> (<gfx arch>)",
/// or "" without one.
std::string gpu_blas_name();

}  // namespace mtk::kernels::impl
