// Tests of the counter-based random kernels (kernels/random.hpp): ranges, moments, layout
// independence.

#include <mtk/base/error.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/kernels.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "mtk_test_util.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace kernel_test_names;

// ------------------------------------------------------------------ random

struct Moments {
  double mean = 0, stddev = 0, min = 1e300, max = -1e300;
};

Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) {
    m.mean += x;
    m.min = std::min(m.min, x);
    m.max = std::max(m.max, x);
  }
  m.mean /= static_cast<double>(v.size());
  for (double x : v)
    m.stddev += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(m.stddev / static_cast<double>(v.size()));
  return m;
}

const Shape kBig{{"x", 400}, {"y", 250}};  // 100k samples
const std::vector<std::int64_t> kZero = {0, 0};

TEST(KernelsRandom, UniformRangeAndMoments) {
  auto v = to_vector(k::random_uniform(mtk::ExecSpace(), kBig, kBig, kZero, 1234, -1.f, 3.f));
  ASSERT_EQ(v.size(), 100000u);
  auto m = moments(v);
  EXPECT_GE(m.min, -1.0);
  EXPECT_LT(m.max, 3.0);
  EXPECT_LT(m.min, -0.99);
  EXPECT_GT(m.max, 2.99);
  EXPECT_NEAR(m.mean, 1.0, 0.02);
  EXPECT_NEAR(m.stddev, 4.0 / std::sqrt(12.0), 0.01);
  // Neighbouring elements are uncorrelated.
  double c = 0;
  for (size_t i = 0; i + 1 < v.size(); ++i)
    c += (v[i] - m.mean) * (v[i + 1] - m.mean);
  EXPECT_NEAR(c / static_cast<double>(v.size() - 1) / (m.stddev * m.stddev), 0.0, 0.02);
  // Unit interval: within [0, 1).
  auto u = to_vector(k::random_uniform(mtk::ExecSpace(), kBig, kBig, kZero, 99, 0.f, 1.f));
  for (double x : u)
    ASSERT_TRUE(x >= 0.0 && x < 1.0) << x;
}

TEST(KernelsRandom, NormalMoments) {
  auto v = to_vector(k::random_normal(mtk::ExecSpace(), kBig, kBig, kZero, 77, 0.5f, 2.f, false));
  auto m = moments(v);
  EXPECT_NEAR(m.mean, 0.5, 0.03);
  EXPECT_NEAR(m.stddev, 2.0, 0.03);
  EXPECT_LT(m.min, 0.5 - 2 * 2.0 * 1.75);  // untruncated: tails beyond 2 stddev occur
  EXPECT_GT(m.max, 0.5 + 2 * 2.0 * 1.75);
  std::int64_t beyond = 0;
  for (double x : v)
    beyond += std::fabs(x - 0.5) > 4.0;
  EXPECT_NEAR(static_cast<double>(beyond) / 100000.0, 0.0455, 0.004);
}

TEST(KernelsRandom, TruncatedNormalWithinTwoStddev) {
  auto v = to_vector(k::random_normal(mtk::ExecSpace(), kBig, kBig, kZero, 78, -1.f, 0.5f, true));
  auto m = moments(v);
  EXPECT_GE(m.min, -1.0 - 1.0);
  EXPECT_LE(m.max, -1.0 + 1.0);
  EXPECT_NEAR(m.mean, -1.0, 0.01);
  // Standard deviation of N(0, 1) truncated to [-2, 2]: 0.8796.
  EXPECT_NEAR(m.stddev, 0.5 * 0.8796, 0.01);
  EXPECT_LT(m.min, -1.0 - 0.99);  // the truncation boundary is approached, not clamped early
  EXPECT_GT(m.max, -1.0 + 0.99);
}

TEST(KernelsRandom, SeedsDifferAndRepeat) {
  Shape s{{"x", 64}};
  std::vector<std::int64_t> o = {0};
  auto a = to_vector(k::random_uniform(mtk::ExecSpace(), s, s, o, 1, 0.f, 1.f));
  auto a2 = to_vector(k::random_uniform(mtk::ExecSpace(), s, s, o, 1, 0.f, 1.f));
  auto b = to_vector(k::random_uniform(mtk::ExecSpace(), s, s, o, 2, 0.f, 1.f));
  EXPECT_EQ(a, a2);
  int same = 0;
  for (size_t i = 0; i < a.size(); ++i)
    same += a[i] == b[i];
  EXPECT_LT(same, 3);
  auto n =
      to_vector(k::random_normal(mtk::ExecSpace(), s, s, o, k::hash_name("w"), 0.f, 1.f, false));
  auto n2 =
      to_vector(k::random_normal(mtk::ExecSpace(), s, s, o, k::hash_name("v"), 0.f, 1.f, false));
  EXPECT_NE(n, n2);
}

/// Generates the global tensor at once and as tiles of `tile` (which divide it), stitching the
/// tiles into global order: they must agree bitwise.
void check_layout_independence(
    const Shape& global, const std::vector<std::int64_t>& tile,
    const std::function<k::FView(const Shape&, const Shape&, const std::vector<std::int64_t>&)>&
        gen) {
  SCOPED_TRACE(global.to_string());
  auto whole = to_vector(gen(global, global, std::vector<std::int64_t>(tile.size(), 0)));
  std::vector<double> stitched(whole.size(), std::nan(""));
  std::vector<mtk::Dimension> ldims = global.dims();
  std::vector<std::int64_t> counts;
  std::int64_t tiles = 1;
  for (size_t i = 0; i < tile.size(); ++i) {
    ldims[i].size = tile[i];
    counts.push_back(global[static_cast<int>(i)].size / tile[i]);
    tiles *= counts.back();
  }
  const Shape local(ldims);
  const Shape grid = [&] {
    std::vector<mtk::Dimension> g;
    for (size_t i = 0; i < counts.size(); ++i)
      g.push_back({"g" + std::to_string(i), counts[i]});
    return Shape(g);
  }();
  for (std::int64_t t = 0; t < tiles; ++t) {
    auto origin = unflatten(grid, t);
    for (size_t i = 0; i < origin.size(); ++i)
      origin[i] *= tile[i];
    auto part = to_vector(gen(global, local, origin));
    ASSERT_EQ(static_cast<std::int64_t>(part.size()), local.num_elements());
    for (std::int64_t e = 0; e < local.num_elements(); ++e) {
      auto idx = unflatten(local, e);
      for (size_t i = 0; i < idx.size(); ++i)
        idx[i] += origin[i];
      stitched[static_cast<size_t>(mtk::test::flat_index(global, idx))] =
          part[static_cast<size_t>(e)];
    }
  }
  for (size_t i = 0; i < whole.size(); ++i) {
    // Bitwise: compare the float bit patterns.
    const float a = static_cast<float>(whole[i]), b = static_cast<float>(stitched[i]);
    std::uint32_t ua, ub;
    std::memcpy(&ua, &a, 4);
    std::memcpy(&ub, &b, 4);
    ASSERT_EQ(ua, ub) << "element " << i;
  }
}

TEST(KernelsRandom, LayoutIndependence) {
  auto uniform = [](const Shape& g, const Shape& l, const std::vector<std::int64_t>& o) {
    return k::random_uniform(mtk::ExecSpace(), g, l, o, 4242, -0.1f, 0.1f);
  };
  auto normal = [](const Shape& g, const Shape& l, const std::vector<std::int64_t>& o) {
    return k::random_normal(mtk::ExecSpace(), g, l, o, 4243, 0.f, 0.02f, false);
  };
  auto truncated = [](const Shape& g, const Shape& l, const std::vector<std::int64_t>& o) {
    return k::random_normal(mtk::ExecSpace(), g, l, o, 4244, 1.f, 3.f, true);
  };
  const Shape g2{{"r", 8}, {"c", 6}};
  const Shape g3{{"a", 4}, {"b", 6}, {"c", 10}};
  for (const auto& gen :
       {std::function<k::FView(const Shape&, const Shape&, const std::vector<std::int64_t>&)>(
            uniform),
        std::function<k::FView(const Shape&, const Shape&, const std::vector<std::int64_t>&)>(
            normal),
        std::function<k::FView(const Shape&, const Shape&, const std::vector<std::int64_t>&)>(
            truncated)}) {
    check_layout_independence(g2, {4, 3}, gen);  // four [4,3] slices
    check_layout_independence(g2, {2, 6}, gen);
    check_layout_independence(g2, {8, 1}, gen);
    check_layout_independence(g3, {2, 3, 5}, gen);
    check_layout_independence(g3, {4, 1, 10}, gen);
  }
}

TEST(KernelsRandom, Errors) {
  const Shape g{{"r", 8}, {"c", 6}};
  expect_error(
      [&] {
        k::random_uniform(mtk::ExecSpace(), g, Shape{{"r", 4}, {"c", 3}}, {6, 0}, 1, 0.f, 1.f);
      },
      {"mtk::kernels::random_uniform", "[r=4, c=3]", "[r=8, c=6]"});
  expect_error(
      [&] {
        k::random_normal(mtk::ExecSpace(), g, Shape{{"c", 6}, {"r", 8}}, {0, 0}, 1, 0.f, 1.f, true);
      },
      {"mtk::kernels::random_normal", "[c=6, r=8]", "[r=8, c=6]"});
  expect_error([&] { k::random_uniform(mtk::ExecSpace(), g, g, {0}, 1, 0.f, 1.f); },
               {"mtk::kernels::random_uniform", "[r=8, c=6]"});
}

TEST(KernelsRandom, HashName) {
  // FNV-1a 64 reference values.
  EXPECT_EQ(k::hash_name(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(k::hash_name("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(k::hash_name("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(k::hash_name("layer_0/w"), k::hash_name("layer_1/w"));
}

}  // namespace
