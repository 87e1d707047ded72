// Batched matrix products through cuBLAS (impl/gpu_blas.hpp) on Kokkos' CUDA space, on Kokkos
// Kernels' cuBLAS handle (the one its own gemm uses) set to the execution space's stream.
#include <mtk/kernels/impl/gpu_blas.hpp>

#if defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
#include <mtk/kernels/impl/gpu_blas_arrangement.hpp>

#include <KokkosBlas_tpl_spec.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

namespace mtk::kernels::impl {
namespace {

constexpr const char* where = "mtk::kernels::cublas_gemm";

template <class Gemm>
void check(cublasStatus_t s, const Gemm& g, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(where, cat(call, " failed (", cublasGetStatusString(s), ") on ", describe(g)));
}

cublasOperation_t op(char t) {
  return t == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
}

template <class Gemm>
cublasHandle_t handle_on(const ExecSpace& space, const Gemm& g) {
  cublasHandle_t h = KokkosBlas::Impl::CudaBlasSingleton::singleton().handle;
  check(cublasSetStream(h, space.cuda_stream()), g, "cublasSetStream");
  return h;
}

}  // namespace

void gpu_blas_gemm(const ExecSpace& space, const BatchedGemm& g, const float* a, const float* b,
                   float* c) {
  const ColumnMajorBatch cm = column_major(where, g);
  const float one = 1.0f;
  check(cublasSgemmStridedBatched(handle_on(space, g), op(cm.ta), op(cm.tb), cm.m, cm.n, cm.k, &one,
                                  b, cm.lda, cm.sa, a, cm.ldb, cm.sb, &g.beta, c, cm.ldc, cm.sc,
                                  cm.batches),
        g, "cublasSgemmStridedBatched");
}

void gpu_blas_gemm_bf16(const ExecSpace& space, const BatchedGemm& g, const std::uint16_t* a,
                        const std::uint16_t* b, float* c) {
  const ColumnMajorBatch cm = column_major(where, g);
  const float one = 1.0f;
  check(cublasGemmStridedBatchedEx(handle_on(space, g), op(cm.ta), op(cm.tb), cm.m, cm.n, cm.k,
                                   &one, b, CUDA_R_16BF, cm.lda, cm.sa, a, CUDA_R_16BF, cm.ldb,
                                   cm.sb, &g.beta, c, CUDA_R_32F, cm.ldc, cm.sc, cm.batches,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        g, "cublasGemmStridedBatchedEx (bf16)");
}

void gpu_blas_gemm_pointers(const ExecSpace& space, const PointerGemm& g, const float* const* a,
                            const float* const* b, float* const* c) {
  const PointerBatchInts i = pointer_ints(where, g);
  const float one = 1.0f;
  check(cublasSgemmBatched(handle_on(space, g), op(g.ta), op(g.tb), i.m, i.n, i.k, &one, a, i.lda,
                           b, i.ldb, &g.beta, c, i.ldc, i.nb),
        g, "cublasSgemmBatched");
}

void gpu_blas_gemm_pointers_bf16(const ExecSpace& space, const PointerGemm& g,
                                 const std::uint16_t* const* a, const std::uint16_t* const* b,
                                 float* const* c) {
  const PointerBatchInts i = pointer_ints(where, g);
  const float one = 1.0f;
  check(cublasGemmBatchedEx(handle_on(space, g), op(g.ta), op(g.tb), i.m, i.n, i.k, &one,
                            reinterpret_cast<const void* const*>(a), CUDA_R_16BF, i.lda,
                            reinterpret_cast<const void* const*>(b), CUDA_R_16BF, i.ldb, &g.beta,
                            reinterpret_cast<void* const*>(c), CUDA_R_32F, i.ldc, i.nb,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        g, "cublasGemmBatchedEx (bf16)");
}

std::string gpu_blas_name() {
  int version = 0, device = 0;
  cublasGetVersion(KokkosBlas::Impl::CudaBlasSingleton::singleton().handle, &version);
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return cat("cuBLAS ", version);
  return cat("cuBLAS ", version / 10000, ".", version / 100 % 100, ".", version % 100, " on ",
             prop.name, " (sm_", prop.major, prop.minor, ")");
}

}  // namespace mtk::kernels::impl

#endif
