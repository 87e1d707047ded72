#pragma once
// Tolerances from the data's condition, for tests that compare float32 results against a float64
// reference: a sum of n products computed in float32 in any order (blocked by a BLAS, pairwise,
// with FMA, split over ranks and allreduced) is within gamma(n) * sum |terms| of the exact sum,
// gamma(n) = n u / (1 - n u), u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms,
// 3.1). Unlike a constant fraction of the largest value, this holds on every CPU and is tight
// where the terms cancel.

#include <mtk/runtime/host_tensor.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mtk::test {

/// float32's unit roundoff.
constexpr double kFloat32Unit = 0x1p-24;

/// gamma(n) = n u / (1 - n u).
inline double rounding_gamma(std::int64_t n) {
  const double nu = static_cast<double>(n) * kFloat32Unit;
  return nu / (1.0 - nu);
}

/// The most a float32 sum of `terms` terms whose magnitudes add up to `abs_sum` may differ from
/// the exact sum (one more rounding for the stored result).
inline double rounding_bound(double abs_sum, std::int64_t terms) {
  return rounding_gamma(terms + 1) * abs_sum;
}

/// Every value of `got` within rounding_bound(abs[e], terms) of `want[e]`.
inline void expect_within_rounding(const HostTensor& got, const std::vector<double>& want,
                                   const std::vector<double>& abs, std::int64_t terms,
                                   const std::string& what) {
  ASSERT_EQ(got.size(), static_cast<std::int64_t>(want.size())) << what;
  ASSERT_EQ(abs.size(), want.size()) << what;
  for (std::int64_t e = 0; e < got.size(); ++e) {
    const size_t i = static_cast<size_t>(e);
    const double bound = rounding_bound(abs[i], terms);
    ASSERT_LE(std::fabs(got.at(e) - want[i]), bound)
        << what << " at " << e << ": " << got.at(e) << " against " << want[i] << " (sum of |terms| "
        << abs[i] << ", " << terms << " terms)";
  }
}

}  // namespace mtk::test
