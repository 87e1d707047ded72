// Tests of the counter-based random kernels (kernels/random.hpp): ranges, moments, layout
// independence; and of stochastic rounding into bfloat16 (kernels::store_bfloat16_stochastic),
// which draws from the same generator.

#include <mtk/base/error.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/bfloat16_storage.hpp>
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
#include <limits>
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

// ------------------------------------------------------------------ stochastic rounding

struct Stored {
  std::vector<std::uint16_t> bits;
  std::vector<float> values;
};

// store_bfloat16_stochastic of `x` (a 1-d tensor "n") into storage holding `start`, read back.
Stored store_stochastic(const std::vector<float>& x, float accumulate, std::uint64_t seed,
                        std::uint64_t counter, const std::vector<float>& start = {}) {
  const auto n = static_cast<std::int64_t>(x.size());
  k::FView xv("x", x.size());
  k::BView stored("stored", x.size());
  auto hx = Kokkos::create_mirror_view(xv);
  auto hs = Kokkos::create_mirror_view(stored);
  for (size_t i = 0; i < x.size(); ++i) {
    hx(i) = x[i];
    hs(i) = start.empty() ? 0 : k::to_bfloat16_bits(start[i]);
  }
  Kokkos::deep_copy(xv, hx);
  Kokkos::deep_copy(stored, hs);
  const Shape s{{"n", n}};
  k::store_bfloat16_stochastic(mtk::ExecSpace(), xv, accumulate, stored, s, s, {0}, seed, counter);
  Kokkos::deep_copy(hs, stored);
  Stored out;
  for (size_t i = 0; i < x.size(); ++i) {
    out.bits.push_back(hs(i));
    out.values.push_back(k::from_bfloat16_bits(hs(i)));
  }
  return out;
}

// The bf16 neighbours of `x`: a <= x < b, a the value truncation gives (for x > 0).
std::pair<float, float> bf16_neighbours(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= 0xffff0000u;
  float a, b;
  std::memcpy(&a, &u, 4);
  u += 0x10000u;
  std::memcpy(&b, &u, 4);
  return {a, b};
}

TEST(StochasticRounding, ExactValuesStayAndOthersGoToANeighbour) {
  std::vector<float> exact = {0.f, -0.f, 1.f, -2.5f, 0.125f, 3.0e38f, 1e-40f, -65280.f};
  for (float& v : exact)
    v = k::round_to_bfloat16(v);
  auto got = store_stochastic(exact, 0.f, 7, 3);
  for (size_t i = 0; i < exact.size(); ++i)
    EXPECT_EQ(got.values[i], exact[i]) << i;  // signed zeros compared as equal: check the bits
  EXPECT_EQ(got.bits[1], 0x8000u);
  const std::vector<float> x = mtk::test::normal_values(4096, 11);
  got = store_stochastic(x, 0.f, 8, 0);
  for (size_t i = 0; i < x.size(); ++i) {
    const auto [lo, hi] = bf16_neighbours(std::fabs(x[i]));
    const float r = std::fabs(got.values[i]);
    EXPECT_TRUE(r == lo || r == hi) << x[i] << " stored as " << got.values[i];
    EXPECT_EQ(std::signbit(got.values[i]), std::signbit(x[i]));
  }
}

TEST(StochasticRounding, UnbiasedAtEveryFraction) {
  const std::size_t n = std::size_t{1} << 16;
  for (double f : {0.01, 0.25, 0.5, 0.9}) {
    for (float sign : {1.f, -1.f}) {
      // 1 + f ulps of bf16 above 1 (ulp 2^-7), exact in float32.
      const float x = sign * static_cast<float>(1.0 + f / 128.0);
      const auto got = store_stochastic(std::vector<float>(n, x), 0.f, 21, 5);
      std::size_t up = 0;
      for (float v : got.values) {
        ASSERT_TRUE(v == sign * 1.f || v == sign * (1.f + 1.f / 128.f)) << v;
        up += v != sign * 1.f;
      }
      const double sd = std::sqrt(f * (1 - f) / static_cast<double>(n));
      EXPECT_NEAR(static_cast<double>(up) / static_cast<double>(n), f, 5 * sd)
          << "fraction " << f << " sign " << sign;
    }
  }
}

TEST(StochasticRounding, AccumulatesInFloat32AndKeepsNanAndInf) {
  // stored + x and stored - x computed in float32 before the rounding: 1 + 1/256 is half an ulp.
  const std::size_t n = std::size_t{1} << 14;
  const auto add =
      store_stochastic(std::vector<float>(n, 1.f / 256.f), 1.f, 3, 1, std::vector<float>(n, 1.f));
  double mean = 0;
  for (float v : add.values)
    mean += v / static_cast<double>(n);
  EXPECT_NEAR(mean, 1.0 + 1.0 / 256.0, 5 * std::sqrt(0.25 / n) / 128.0);
  const auto sub =
      store_stochastic(std::vector<float>(n, 1.f), -1.f, 3, 1, std::vector<float>(n, 2.f));
  for (float v : sub.values)
    ASSERT_EQ(v, 1.f);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto special = store_stochastic({inf, -inf, nan, -nan}, 0.f, 9, 2);
  EXPECT_EQ(special.bits[0], k::to_bfloat16_bits(inf));
  EXPECT_EQ(special.bits[1], k::to_bfloat16_bits(-inf));
  EXPECT_EQ(special.bits[2], k::to_bfloat16_bits(nan));
  EXPECT_EQ(special.bits[3], k::to_bfloat16_bits(-nan));
  EXPECT_TRUE(std::isnan(special.values[2]) && std::isnan(special.values[3]));
}

TEST(StochasticRounding, BitsDependOnSeedCounterAndGlobalIndexOnly) {
  const std::vector<float> x = mtk::test::normal_values(2048, 12);
  const auto a = store_stochastic(x, 0.f, 42, 7);
  EXPECT_EQ(store_stochastic(x, 0.f, 42, 7).bits, a.bits);
  auto differing = [&](const Stored& b) {
    int d = 0;
    for (size_t i = 0; i < x.size(); ++i)
      d += a.bits[i] != b.bits[i];
    return d;
  };
  // About a half of the roundings change with fresh bits.
  EXPECT_GT(differing(store_stochastic(x, 0.f, 42, 8)), 500);
  EXPECT_GT(differing(store_stochastic(x, 0.f, 43, 7)), 500);
  // Any slice [8, 16) of a [6, 16] tensor stores what the whole does there.
  const Shape g{{"r", 6}, {"c", 16}}, l{{"r", 3}, {"c", 8}};
  const std::vector<float> whole_x(x.begin(), x.begin() + 96);
  k::FView xv("x", 24);
  k::BView part("part", 24);
  auto hx = Kokkos::create_mirror_view(xv);
  const auto whole = store_stochastic(whole_x, 0.f, 42, 7);
  for (std::int64_t r0 : {0, 3})
    for (std::int64_t c0 : {0, 8}) {
      for (std::int64_t e = 0; e < 24; ++e)
        hx(e) = whole_x[static_cast<size_t>((r0 + e / 8) * 16 + c0 + e % 8)];
      Kokkos::deep_copy(xv, hx);
      k::store_bfloat16_stochastic(mtk::ExecSpace(), xv, 0.f, part, g, l, {r0, c0}, 42, 7);
      auto hp = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), part);
      for (std::int64_t e = 0; e < 24; ++e)
        EXPECT_EQ(hp(e), whole.bits[static_cast<size_t>((r0 + e / 8) * 16 + c0 + e % 8)])
            << "slice at (" << r0 << ", " << c0 << ") element " << e;
    }
}

TEST(StochasticRounding, Errors) {
  k::FView x("x", 8);
  k::BView stored("stored", 6);
  const Shape s{{"n", 8}};
  expect_error(
      [&] { k::store_bfloat16_stochastic(mtk::ExecSpace(), x, 0.f, stored, s, s, {0}, 1, 0); },
      {"mtk::kernels::store_bfloat16_stochastic", "'x' holds 8", "'stored' 6"});
  k::BView stored8("stored8", 8);
  expect_error(
      [&] { k::store_bfloat16_stochastic(mtk::ExecSpace(), x, 0.f, stored8, s, s, {2}, 1, 0); },
      {"mtk::kernels::store_bfloat16_stochastic", "[n=8]"});
}

}  // namespace
