// impl/gpu_blas.hpp in a build without a GPU vendor BLAS (the host backends; a GPU Kokkos whose
// Kokkos Kernels lacks cuBLAS / rocBLAS, where contractions take the packed Kokkos Kernels gemm):
// every product call fails naming how to get one.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>

#if !(defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)) && \
    !(defined(KOKKOS_ENABLE_HIP) && defined(KOKKOSKERNELS_ENABLE_TPL_ROCBLAS))

namespace mtk::kernels::impl {
namespace {
[[noreturn]] void unavailable() {
  fail("mtk::kernels::gpu_blas_gemm",
       "this MTK has no GPU BLAS: cuBLAS / rocBLAS are used only in a build for Kokkos' CUDA or "
       "HIP space whose Kokkos Kernels has that library (docs/building.md#cuda, #hip)");
}
}  // namespace

void gpu_blas_gemm(const ExecSpace&, const BatchedGemm&, const float*, const float*, float*) {
  unavailable();
}
void gpu_blas_gemm_bf16(const ExecSpace&, const BatchedGemm&, const std::uint16_t*,
                        const std::uint16_t*, float*) {
  unavailable();
}
void gpu_blas_gemm_pointers(const ExecSpace&, const PointerGemm&, const float* const*,
                            const float* const*, float* const*) {
  unavailable();
}
void gpu_blas_gemm_pointers_bf16(const ExecSpace&, const PointerGemm&, const std::uint16_t* const*,
                                 const std::uint16_t* const*, float* const*) {
  unavailable();
}
std::string gpu_blas_name() {
  return "";
}

}  // namespace mtk::kernels::impl

#endif
