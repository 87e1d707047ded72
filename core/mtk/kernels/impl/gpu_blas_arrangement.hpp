#pragma once
// How the GPU BLAS bodies (kernels/cublas_gemm.cpp, kernels/rocblas_gemm.cpp) hand MTK's row-major
// products to a column-major library: the same arithmetic for every vendor, in one place.

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/einsum_plan.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>

#include <string>

namespace mtk::kernels::impl {

/// A strided batch in the library's terms: row-major C = op(A) op(B) is column-major
/// C^T = op(B)^T op(A)^T, so the library is called with the operands swapped, B's view first. A
/// row-major [r][c] matrix is the column-major [c][r] one: each leading dimension is the stored
/// row length. ta/tb are 'N' or 'T' of the library's first and second operand.
struct ColumnMajorBatch {
  char ta = 'N', tb = 'N';
  int m = 0, n = 0, k = 0, lda = 1, ldb = 1, ldc = 1;
  long long sa = 0, sb = 0, sc = 0;
  int batches = 1;
};

inline ColumnMajorBatch column_major(const char* where, const BatchedGemm& g) {
  using einsum_impl::blas_int;
  ColumnMajorBatch c;
  c.ta = g.tb;
  c.tb = g.ta;
  c.m = blas_int(where, g.n, "N");
  c.n = blas_int(where, g.m, "M");
  c.k = blas_int(where, g.k, "K");
  c.lda = g.tb == 'T' ? c.k : c.m;  // B stored [k][n] ('N') or [n][k] ('T')
  c.ldb = g.ta == 'T' ? c.n : c.k;  // A stored [m][k] ('N') or [k][m] ('T')
  c.ldc = c.m;
  c.sa = static_cast<long long>(g.k) * g.n;
  c.sb = static_cast<long long>(g.m) * g.k;
  c.sc = static_cast<long long>(g.m) * g.n;
  c.batches = blas_int(where, g.nb, "the batch");
  return c;
}

/// A pointer batch's sizes as the library's 32-bit integers (an error naming the size otherwise).
struct PointerBatchInts {
  int m, n, k, lda, ldb, ldc, nb;
};

inline PointerBatchInts pointer_ints(const char* where, const PointerGemm& g) {
  using einsum_impl::blas_int;
  return {blas_int(where, g.m, "M"),         blas_int(where, g.n, "N"),
          blas_int(where, g.k, "K"),         blas_int(where, g.lda, "lda"),
          blas_int(where, g.ldb, "ldb"),     blas_int(where, g.ldc, "ldc"),
          blas_int(where, g.nb, "the batch")};
}

/// "<nb> products of [m, k] x [k, n], op NT" for error messages.
inline std::string describe(const BatchedGemm& g) {
  return cat(g.nb, " products of [", g.m, ", ", g.k, "] x [", g.k, ", ", g.n, "], op ", g.ta, g.tb);
}
inline std::string describe(const PointerGemm& g) {
  return cat(g.nb, " column-major products of [", g.m, ", ", g.k, "] x [", g.k, ", ", g.n, "], op ",
             g.ta, g.tb, ", ld ", g.lda, " ", g.ldb, " ", g.ldc);
}

}  // namespace mtk::kernels::impl
