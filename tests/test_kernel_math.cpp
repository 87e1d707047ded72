// fast_exp against the C library's expf, over the whole float range.

#include <mtk_kernel_math.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

TEST(KernelMath, FastExpWithinTwoUlpOfExpf) {
  double worst = 0;
  for (float x = -87.0f; x <= 88.5f; x += 0.000731f) {
    const float want = std::exp(x), got = mtk::kernels::fast_exp(x);
    const float ulp = std::nextafter(want, std::numeric_limits<float>::infinity()) - want;
    const double err = std::fabs(static_cast<double>(got) - want) / ulp;
    worst = std::max(worst, err);
    ASSERT_LE(err, 2.0) << "x = " << x << ": " << got << " vs " << want;
  }
  EXPECT_EQ(mtk::kernels::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(mtk::kernels::fast_exp(-1000.0f), 0.0f);
  EXPECT_TRUE(std::isinf(mtk::kernels::fast_exp(1000.0f)));
  EXPECT_TRUE(std::isnan(mtk::kernels::fast_exp(std::nanf(""))));
  std::printf("worst error %.2f ulp\n", worst);
}
