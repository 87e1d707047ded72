// Batched matrix products through rocBLAS (impl/gpu_blas.hpp) on Kokkos' HIP space (AMD GPUs), on
// Kokkos Kernels' rocBLAS handle (the one its own gemm uses) set to the execution space's stream.
// bf16 products run on the matrix cores with float32 accumulation (rocblas_*_ex, compute f32).
#include <mtk/kernels/impl/gpu_blas.hpp>

#if defined(KOKKOS_ENABLE_HIP) && defined(KOKKOSKERNELS_ENABLE_TPL_ROCBLAS)
#include <mtk/kernels/impl/gpu_blas_arrangement.hpp>

#include <KokkosBlas_tpl_spec.hpp>

#include <hip/hip_runtime_api.h>
#if __has_include(<rocblas/rocblas.h>)
#include <rocblas/rocblas.h>
#else
#include <rocblas.h>
#endif

namespace mtk::kernels::impl {
namespace {

constexpr const char* where = "mtk::kernels::rocblas_gemm";

template <class Gemm>
void check(rocblas_status s, const Gemm& g, const char* call) {
  if (s != rocblas_status_success)
    fail(where, cat(call, " failed (", rocblas_status_to_string(s), ") on ", describe(g)));
}

rocblas_operation op(char t) {
  return t == 'T' ? rocblas_operation_transpose : rocblas_operation_none;
}

template <class Gemm>
rocblas_handle handle_on(const ExecSpace& space, const Gemm& g) {
  rocblas_handle h = KokkosBlas::Impl::RocBlasSingleton::singleton().handle;
  check(rocblas_set_stream(h, space.hip_stream()), g, "rocblas_set_stream");
  return h;
}

}  // namespace

void gpu_blas_gemm(const ExecSpace& space, const BatchedGemm& g, const float* a, const float* b,
                   float* c) {
  const ColumnMajorBatch cm = column_major(where, g);
  const float one = 1.0f;
  check(rocblas_sgemm_strided_batched(handle_on(space, g), op(cm.ta), op(cm.tb), cm.m, cm.n, cm.k,
                                      &one, b, cm.lda, cm.sa, a, cm.ldb, cm.sb, &g.beta, c, cm.ldc,
                                      cm.sc, cm.batches),
        g, "rocblas_sgemm_strided_batched");
}

void gpu_blas_gemm_bf16(const ExecSpace& space, const BatchedGemm& g, const std::uint16_t* a,
                        const std::uint16_t* b, float* c) {
  const ColumnMajorBatch cm = column_major(where, g);
  const float one = 1.0f;
  // C and D the same matrix: rocBLAS's _ex calls write D = alpha op(A) op(B) + beta C.
  check(rocblas_gemm_strided_batched_ex(
            handle_on(space, g), op(cm.ta), op(cm.tb), cm.m, cm.n, cm.k, &one, b,
            rocblas_datatype_bf16_r, cm.lda, cm.sa, a, rocblas_datatype_bf16_r, cm.ldb, cm.sb,
            &g.beta, c, rocblas_datatype_f32_r, cm.ldc, cm.sc, c, rocblas_datatype_f32_r, cm.ldc,
            cm.sc, cm.batches, rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0),
        g, "rocblas_gemm_strided_batched_ex (bf16)");
}

void gpu_blas_gemm_pointers(const ExecSpace& space, const PointerGemm& g, const float* const* a,
                            const float* const* b, float* const* c) {
  const PointerBatchInts i = pointer_ints(where, g);
  const float one = 1.0f;
  check(rocblas_sgemm_batched(handle_on(space, g), op(g.ta), op(g.tb), i.m, i.n, i.k, &one, a,
                              i.lda, b, i.ldb, &g.beta, c, i.ldc, i.nb),
        g, "rocblas_sgemm_batched");
}

void gpu_blas_gemm_pointers_bf16(const ExecSpace& space, const PointerGemm& g,
                                 const std::uint16_t* const* a, const std::uint16_t* const* b,
                                 float* const* c) {
  const PointerBatchInts i = pointer_ints(where, g);
  const float one = 1.0f;
  // The _ex batched form takes each pointer array as a void*; C is D, as above.
  check(rocblas_gemm_batched_ex(handle_on(space, g), op(g.ta), op(g.tb), i.m, i.n, i.k, &one, a,
                                rocblas_datatype_bf16_r, i.lda, b, rocblas_datatype_bf16_r, i.ldb,
                                &g.beta, c, rocblas_datatype_f32_r, i.ldc, const_cast<float**>(c),
                                rocblas_datatype_f32_r, i.ldc, i.nb, rocblas_datatype_f32_r,
                                rocblas_gemm_algo_standard, 0, 0),
        g, "rocblas_gemm_batched_ex (bf16)");
}

std::string gpu_blas_name() {
  char version[128] = {0};
  rocblas_get_version_string(version, sizeof version);
  int device = 0;
  hipDeviceProp_t prop{};
  if (hipGetDevice(&device) != hipSuccess || hipGetDeviceProperties(&prop, device) != hipSuccess)
    return cat("rocBLAS ", version);
  return cat("rocBLAS ", version, " on ", prop.name, " (", prop.gcnArchName, ")");
}

}  // namespace mtk::kernels::impl

#endif
