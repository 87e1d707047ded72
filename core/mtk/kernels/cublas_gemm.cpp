// Batched matrix products through cuBLAS (impl/cublas_gemm.hpp), on Kokkos Kernels' cuBLAS handle
// (the one its own gemm uses) set to the execution space's stream.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/cublas_gemm.hpp>
#include <mtk/kernels/impl/einsum_plan.hpp>

#if defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
#include <KokkosBlas_tpl_spec.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

namespace mtk::kernels::impl {

#if defined(KOKKOS_ENABLE_CUDA) && defined(KOKKOSKERNELS_ENABLE_TPL_CUBLAS)
namespace {

constexpr const char* where = "mtk::kernels::cublas_gemm";

void check(cublasStatus_t s, const BatchedGemm& g, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(where, cat(call, " failed (", cublasGetStatusString(s), ") on ", g.nb, " products of [",
                    g.m, ", ", g.k, "] x [", g.k, ", ", g.n, "], op ", g.ta, g.tb));
}

cublasOperation_t op(char t) {
  return t == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS is called with the
// operands swapped, B's column-major view first. A row-major [r][c] matrix is the column-major
// [c][r] one, so each operand's leading dimension is its stored row length.
struct ColumnMajor {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc;
  long long sa, sb, sc;
  int batches;
};

ColumnMajor column_major(const BatchedGemm& g) {
  ColumnMajor c;
  c.ta = op(g.tb);
  c.tb = op(g.ta);
  c.m = einsum_impl::blas_int(where, g.n, "N");
  c.n = einsum_impl::blas_int(where, g.m, "M");
  c.k = einsum_impl::blas_int(where, g.k, "K");
  c.lda = g.tb == 'T' ? c.k : c.m;  // B stored [k][n] ('N') or [n][k] ('T')
  c.ldb = g.ta == 'T' ? c.n : c.k;  // A stored [m][k] ('N') or [k][m] ('T')
  c.ldc = c.m;
  c.sa = static_cast<long long>(g.k) * g.n;
  c.sb = static_cast<long long>(g.m) * g.k;
  c.sc = static_cast<long long>(g.m) * g.n;
  c.batches = einsum_impl::blas_int(where, g.nb, "the batch");
  return c;
}

cublasHandle_t handle_on(const ExecSpace& space, const BatchedGemm& g) {
  cublasHandle_t h = KokkosBlas::Impl::CudaBlasSingleton::singleton().handle;
  check(cublasSetStream(h, space.cuda_stream()), g, "cublasSetStream");
  return h;
}

}  // namespace

void cublas_gemm(const ExecSpace& space, const BatchedGemm& g, const float* a, const float* b,
                 float* c) {
  const ColumnMajor cm = column_major(g);
  const float one = 1.0f;
  check(cublasSgemmStridedBatched(handle_on(space, g), cm.ta, cm.tb, cm.m, cm.n, cm.k, &one, b,
                                  cm.lda, cm.sa, a, cm.ldb, cm.sb, &g.beta, c, cm.ldc, cm.sc,
                                  cm.batches),
        g, "cublasSgemmStridedBatched");
}

void cublas_gemm_bf16(const ExecSpace& space, const BatchedGemm& g, const std::uint16_t* a,
                      const std::uint16_t* b, float* c) {
  const ColumnMajor cm = column_major(g);
  const float one = 1.0f;
  check(cublasGemmStridedBatchedEx(handle_on(space, g), cm.ta, cm.tb, cm.m, cm.n, cm.k, &one, b,
                                   CUDA_R_16BF, cm.lda, cm.sa, a, CUDA_R_16BF, cm.ldb, cm.sb,
                                   &g.beta, c, CUDA_R_32F, cm.ldc, cm.sc, cm.batches,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        g, "cublasGemmStridedBatchedEx (bf16)");
}

namespace {

void check_pointers(cublasStatus_t s, const PointerGemm& g, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    fail(where, cat(call, " failed (", cublasGetStatusString(s), ") on ", g.nb,
                    " column-major products of [", g.m, ", ", g.k, "] x [", g.k, ", ", g.n,
                    "], op ", g.ta, g.tb, ", ld ", g.lda, " ", g.ldb, " ", g.ldc));
}

struct Ints {
  int m, n, k, lda, ldb, ldc, nb;
};

Ints ints(const PointerGemm& g) {
  using einsum_impl::blas_int;
  return {blas_int(where, g.m, "M"),         blas_int(where, g.n, "N"),
          blas_int(where, g.k, "K"),         blas_int(where, g.lda, "lda"),
          blas_int(where, g.ldb, "ldb"),     blas_int(where, g.ldc, "ldc"),
          blas_int(where, g.nb, "the batch")};
}

cublasHandle_t handle_for(const ExecSpace& space, const PointerGemm& g) {
  cublasHandle_t h = KokkosBlas::Impl::CudaBlasSingleton::singleton().handle;
  check_pointers(cublasSetStream(h, space.cuda_stream()), g, "cublasSetStream");
  return h;
}

}  // namespace

void cublas_gemm_pointers(const ExecSpace& space, const PointerGemm& g, const float* const* a,
                          const float* const* b, float* const* c) {
  const Ints i = ints(g);
  const float one = 1.0f;
  check_pointers(cublasSgemmBatched(handle_for(space, g), op(g.ta), op(g.tb), i.m, i.n, i.k, &one,
                                    a, i.lda, b, i.ldb, &g.beta, c, i.ldc, i.nb),
                 g, "cublasSgemmBatched");
}

void cublas_gemm_pointers_bf16(const ExecSpace& space, const PointerGemm& g,
                               const std::uint16_t* const* a, const std::uint16_t* const* b,
                               float* const* c) {
  const Ints i = ints(g);
  const float one = 1.0f;
  check_pointers(cublasGemmBatchedEx(handle_for(space, g), op(g.ta), op(g.tb), i.m, i.n, i.k, &one,
                                     reinterpret_cast<const void* const*>(a), CUDA_R_16BF, i.lda,
                                     reinterpret_cast<const void* const*>(b), CUDA_R_16BF, i.ldb,
                                     &g.beta, reinterpret_cast<void* const*>(c), CUDA_R_32F, i.ldc,
                                     i.nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 g, "cublasGemmBatchedEx (bf16)");
}

std::string cublas_name() {
  int version = 0, device = 0;
  cublasGetVersion(KokkosBlas::Impl::CudaBlasSingleton::singleton().handle, &version);
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess)
    return cat("cuBLAS ", version);
  return cat("cuBLAS ", version / 10000, ".", version / 100 % 100, ".", version % 100, " on ",
             prop.name, " (sm_", prop.major, prop.minor, ")");
}

#else

namespace {
[[noreturn]] void unavailable() {
  fail("mtk::kernels::cublas_gemm",
       "this MTK runs on the host: cuBLAS is used only in a build for Kokkos' CUDA space with "
       "Kokkos Kernels' cuBLAS (docs/building.md#cuda)");
}
}  // namespace

void cublas_gemm(const ExecSpace&, const BatchedGemm&, const float*, const float*, float*) {
  unavailable();
}
void cublas_gemm_bf16(const ExecSpace&, const BatchedGemm&, const std::uint16_t*,
                      const std::uint16_t*, float*) {
  unavailable();
}
void cublas_gemm_pointers(const ExecSpace&, const PointerGemm&, const float* const*,
                          const float* const*, float* const*) {
  unavailable();
}
void cublas_gemm_pointers_bf16(const ExecSpace&, const PointerGemm&, const std::uint16_t* const*,
                               const std::uint16_t* const*, float* const*) {
  unavailable();
}
std::string cublas_name() {
  return "";
}

#endif

}  // namespace mtk::kernels::impl
