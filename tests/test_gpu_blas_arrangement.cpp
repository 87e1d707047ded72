// The GPU BLAS bodies (kernels/cublas_gemm.cpp, kernels/rocblas_gemm.cpp) hand a row-major batch
// to a column-major library through impl::column_major(): the library is called with the operands
// swapped, op flags, leading dims and strides taken from it. Checked on every CPU by running a
// column-major strided-batched sgemm written here with exactly those arguments, against the
// row-major product, for every transposition; and the 32-bit size checks' errors.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/gpu_blas_arrangement.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace {

namespace impl = mtk::kernels::impl;

// Column-major C_i = op(X_i) op(Y_i) + beta C_i as BLAS defines it (X is m x k after op).
void column_major_sgemm(char tx, char ty, int m, int n, int k, const float* x, int ldx,
                        long long sx, const float* y, int ldy, long long sy, float beta, float* c,
                        int ldc, long long sc, int batches) {
  for (int b = 0; b < batches; ++b)
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double sum = 0;
        for (int p = 0; p < k; ++p) {
          const float xv = tx == 'N' ? x[b * sx + i + static_cast<long long>(p) * ldx]
                                     : x[b * sx + p + static_cast<long long>(i) * ldx];
          const float yv = ty == 'N' ? y[b * sy + p + static_cast<long long>(j) * ldy]
                                     : y[b * sy + j + static_cast<long long>(p) * ldy];
          sum += static_cast<double>(xv) * yv;
        }
        float& out = c[b * sc + i + static_cast<long long>(j) * ldc];
        out = static_cast<float>(sum + beta * out);
      }
}

// The i-th batch entry's row-major op(a) [m][k] element (r, p).
float row_major_at(const std::vector<float>& a, char t, std::int64_t rows, std::int64_t cols,
                   std::int64_t entry, std::int64_t r, std::int64_t p) {
  const std::int64_t base = entry * rows * cols;
  return t == 'N' ? a[base + r * cols + p] : a[base + p * rows + r];
}

TEST(GpuBlasArrangement, ColumnMajorCallComputesTheRowMajorProduct) {
  for (char ta : {'N', 'T'})
    for (char tb : {'N', 'T'})
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE(std::string("op ") + ta + tb + " beta " + std::to_string(beta));
        impl::BatchedGemm g;
        g.ta = ta;
        g.tb = tb;
        g.nb = 3;
        g.m = 4;
        g.n = 5;
        g.k = 6;
        g.beta = beta;
        std::vector<float> a(g.nb * g.m * g.k), b(g.nb * g.k * g.n), c(g.nb * g.m * g.n);
        for (size_t i = 0; i < a.size(); ++i)
          a[i] = static_cast<float>(static_cast<int>(i * 7 % 11) - 5);
        for (size_t i = 0; i < b.size(); ++i)
          b[i] = static_cast<float>(static_cast<int>(i * 5 % 13) - 6);
        for (size_t i = 0; i < c.size(); ++i)
          c[i] = static_cast<float>(i % 3);
        std::vector<float> expect(c);
        for (std::int64_t e = 0; e < g.nb; ++e)
          for (std::int64_t r = 0; r < g.m; ++r)
            for (std::int64_t col = 0; col < g.n; ++col) {
              float sum = 0;
              for (std::int64_t p = 0; p < g.k; ++p)
                sum += row_major_at(a, ta, g.m, g.k, e, r, p) *
                       row_major_at(b, tb, g.k, g.n, e, p, col);
              float& out = expect[e * g.m * g.n + r * g.n + col];
              out = sum + beta * out;
            }
        // As the bodies call the library: B's view first, then A's.
        const impl::ColumnMajorBatch cm = impl::column_major("test", g);
        column_major_sgemm(cm.ta, cm.tb, cm.m, cm.n, cm.k, b.data(), cm.lda, cm.sa, a.data(),
                           cm.ldb, cm.sb, g.beta, c.data(), cm.ldc, cm.sc, cm.batches);
        EXPECT_EQ(c, expect);  // small integers: exact in float32 in any order
      }
}

TEST(GpuBlasArrangement, SizesPastTheLibrarysIntegersAreErrorsNamingThem) {
  impl::BatchedGemm g;
  g.m = 2;
  g.n = 2;
  g.k = std::int64_t{std::numeric_limits<int>::max()} + 1;
  try {
    (void)impl::column_major("mtk::kernels::test_gemm", g);
    FAIL() << "no error for K past int";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mtk::kernels::test_gemm"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("K"), std::string::npos) << e.what();
  }
  impl::PointerGemm p;
  p.m = p.n = p.k = 2;
  p.lda = std::int64_t{1} << 40;
  EXPECT_THROW((void)impl::pointer_ints("mtk::kernels::test_gemm", p), mtk::Error);
  p.lda = 2;
  const impl::PointerBatchInts i = impl::pointer_ints("mtk::kernels::test_gemm", p);
  EXPECT_EQ(i.lda, 2);
  EXPECT_NE(impl::describe(p).find("ld 2 1 1"), std::string::npos) << impl::describe(p);
}

TEST(GpuBlasArrangement, HostBuildsHaveNoGpuBlasAndSaySo) {
  if (impl::gpu_blas_available())
    GTEST_SKIP() << "this build has " << impl::gpu_blas_vendor();
  EXPECT_STREQ(impl::gpu_blas_vendor(), "");
  EXPECT_EQ(impl::gpu_blas_name(), "");
  impl::BatchedGemm g;
  float x = 0;
  try {
    impl::gpu_blas_gemm(mtk::ExecSpace(), g, &x, &x, &x);
    FAIL() << "no error without a GPU BLAS";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuBLAS / rocBLAS"), std::string::npos) << e.what();
  }
}

}  // namespace
