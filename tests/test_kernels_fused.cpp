// Tests of the fused kernels (the vectorisable exponential, softmax cross-entropy statistics and
// gradient, layer norm, Adafactor) against unfused formulas evaluated on the host in double.

#include <mtk/base/shape.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/impl/fast_exp.hpp>
#include <mtk/kernels/kernels.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "mtk_test_util.hpp"
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace {

using namespace kernel_test_names;

// ------------------------------------------------------------------ fast_exp

float fast_exp_on_space(float x) {
  Kokkos::View<float*> v("x", 1);
  Kokkos::deep_copy(v, x);
  Kokkos::parallel_for(
      "test_fast_exp", Kokkos::RangePolicy<mtk::ExecSpace>(0, 1),
      KOKKOS_LAMBDA(int i) { v(i) = mtk::kernels::impl::fast_exp(v(i)); });
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
  return h(0);
}

TEST(FastExp, WithinTwoUlpOfExpOverTheWholeRange) {
  double worst = 0;
  for (float x = -86.5f; x < 88.7f; x += 0.00137f) {
    const double ref = std::exp(static_cast<double>(x));
    const double got = mtk::kernels::impl::fast_exp(x);
    const double ulp = std::ldexp(1.0, std::ilogb(ref) - 23);
    worst = std::max(worst, std::fabs(got - ref) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(mtk::kernels::impl::fast_exp(0.0f), 1.0f);
}

TEST(FastExp, EdgeValuesOnTheExecutionSpace) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(fast_exp_on_space(-inf), 0.0f);
  EXPECT_EQ(fast_exp_on_space(-1000.0f), 0.0f);
  EXPECT_EQ(fast_exp_on_space(-87.0f), 0.0f);  // flushed: below 2.4e-38
  EXPECT_NEAR(fast_exp_on_space(-86.0f), std::exp(-86.0), 1e-6 * std::exp(-86.0));
  EXPECT_NEAR(fast_exp_on_space(88.7f), std::exp(double{88.7f}), 1e-6 * std::exp(double{88.7f}));
  EXPECT_EQ(fast_exp_on_space(89.0f), inf);
  EXPECT_EQ(fast_exp_on_space(inf), inf);
  EXPECT_TRUE(std::isnan(fast_exp_on_space(std::nanf(""))));
}

// ------------------------------------------------------------------ softmax cross-entropy

// Unfused reference in double: per row lse, loss and the gradient of sum(dy * loss).
struct RefCe {
  std::vector<double> loss, lse, grad;
};

RefCe ref_cross_entropy(const Shape& s, int dim, const std::vector<double>& x,
                        const std::vector<double>& t, const std::vector<double>& dy, double ls,
                        double z) {
  const mtk::Around a(s, dim);
  const std::int64_t V = a.n, inner = a.inner, rows = a.outer * a.inner;
  RefCe r{std::vector<double>(rows), std::vector<double>(rows), std::vector<double>(x.size())};
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t base = (row / inner) * V * inner + row % inner;
    double m = -1e300, sum = 0;
    for (std::int64_t j = 0; j < V; ++j) {
      m = std::max(m, x[base + j * inner]);
      sum += x[base + j * inner];
    }
    double se = 0;
    for (std::int64_t j = 0; j < V; ++j)
      se += std::exp(x[base + j * inner] - m);
    const double lse = m + std::log(se);
    const auto tt = static_cast<std::int64_t>(t[row]);
    r.lse[row] = lse;
    r.loss[row] = lse - (1 - ls) * x[base + tt * inner] - ls / V * sum + z * lse * lse;
    for (std::int64_t j = 0; j < V; ++j) {
      const double p = std::exp(x[base + j * inner] - lse);
      r.grad[base + j * inner] =
          dy[row] * (p * (1 + 2 * z * lse) - (j == tt ? 1 - ls : 0.0) - ls / V);
    }
  }
  return r;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << what << " at " << i;
}

TEST(FusedCrossEntropy, StatisticsLossAndGradientMatchTheUnfusedFormula) {
  // Rows contiguous (vocabulary last, 37 = not a multiple of the 8 lanes) and strided; also in the
  // GPU's form (a team per row for the statistics, a thread per element for the gradient).
  for (const bool device : {false, true})
    for (const auto& [s, dim] :
         std::vector<std::pair<Shape, int>>{{Shape{{"b", 5}, {"v", 37}}, 1},
                                            {Shape{{"b", 3}, {"v", 1000}}, 1},
                                            {Shape{{"a", 3}, {"v", 21}, {"c", 4}}, 1}}) {
      const DevicePaths paths(device);
      SCOPED_TRACE(s.to_string() + (device ? " (device paths)" : ""));
      const mtk::Around a(s, dim);
      const std::int64_t rows = a.outer * a.inner;
      const auto x = random_values(s.num_elements(), -30, 30, 7);
      const auto t = random_ints(rows, 0, static_cast<int>(a.n) - 1, 8);
      const auto dy = random_values(rows, -2, 2, 9);
      for (const auto& [ls, z] : std::vector<std::pair<double, double>>{{0, 0}, {0.1, 1e-2}}) {
        const auto ref = ref_cross_entropy(s, dim, x, t, dy, ls, z);
        const mtk::ExecSpace space;
        const auto X = to_view<float>(x);
        const auto T = to_view<I32>(t);
        auto st = k::cross_entropy_stats(space, s, X, dim, T, 0);
        k::FView loss, lse;
        k::cross_entropy_from_stats(space, st, ls, a.n, z, loss, lse);
        expect_close(to_vector(lse), ref.lse, 2e-6, "lse");
        expect_close(to_vector(loss), ref.loss, 2e-5, "loss");
        const auto g =
            k::cross_entropy_grad(space, s, X, dim, T, 0, lse, to_view<float>(dy), ls, a.n, z);
        expect_close(to_vector(g), ref.grad, 2e-6, "gradient");
        // Written over the logits (as the lowering does when they die there): the same values.
        const auto X2 = to_view<float>(x);
        const auto g2 =
            k::cross_entropy_grad(space, s, X2, dim, T, 0, lse, to_view<float>(dy), ls, a.n, z, X2);
        ASSERT_EQ(g2.data(), X2.data());
        EXPECT_EQ(to_vector(g2), to_vector(g)) << "in place";
        // With the bf16 copy written beside it (in place and not): the gradient's bit patterns.
        for (bool in_place : {false, true}) {
          const auto X3 = to_view<float>(x);
          Kokkos::View<std::uint16_t*> bits("bits", X3.extent(0));
          const auto g3 = k::cross_entropy_grad(space, s, X3, dim, T, 0, lse, to_view<float>(dy),
                                                ls, a.n, z, in_place ? X3 : k::FView(), bits);
          const auto gv = to_vector(g3);
          ASSERT_EQ(gv, to_vector(g));
          auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), bits);
          for (size_t e = 0; e < gv.size(); ++e)
            ASSERT_EQ(hb(e), mtk::kernels::to_bfloat16_bits(static_cast<float>(gv[e]))) << e;
        }
        // The bit patterns alone, in the first half of the output's own storage (in place over
        // the logits, the rows' bits landing on rows already read, and not): the same bits.
        for (bool in_place : {false, true}) {
          const auto X4 = to_view<float>(x);
          const auto g4 = k::cross_entropy_grad(space, s, X4, dim, T, 0, lse, to_view<float>(dy),
                                                ls, a.n, z, in_place ? X4 : k::FView(), {}, true);
          ASSERT_EQ(g4.data() == X4.data(), in_place);
          const Kokkos::View<std::uint16_t*> in_g4(reinterpret_cast<std::uint16_t*>(g4.data()),
                                                   g4.extent(0));
          auto hb = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), in_g4);
          const auto gv = to_vector(g);
          for (size_t e = 0; e < gv.size(); ++e)
            ASSERT_EQ(hb(e), mtk::kernels::to_bfloat16_bits(static_cast<float>(gv[e])))
                << e << (in_place ? " (in place)" : "");
        }
      }
    }
}

TEST(FusedCrossEntropy, SlicesRebasedOnTheGlobalMaxAddUpToTheWholeRow) {
  // The vocabulary split in two slices (as over a mesh dim): per-slice statistics, the max over
  // slices, rebased sums added = the statistics of the whole row.
  const Shape whole{{"b", 6}, {"v", 40}}, half{{"b", 6}, {"v", 20}};
  auto x = random_values(whole.num_elements(), -20, 20, 3);
  for (std::int64_t j = 0; j < 20; ++j)  // row 0: all of its max in the second slice
    x[j] -= 50;
  const auto t = random_ints(6, 0, 39, 4);
  std::vector<std::vector<double>> slice(2);
  for (int p = 0; p < 2; ++p)
    for (std::int64_t r = 0; r < 6; ++r)
      for (std::int64_t j = 0; j < 20; ++j)
        slice[p].push_back(x[r * 40 + p * 20 + j]);
  const mtk::ExecSpace space;
  std::vector<k::FView> st;
  for (int p = 0; p < 2; ++p)
    st.push_back(
        k::cross_entropy_stats(space, half, to_view<float>(slice[p]), 1, to_view<I32>(t), 20 * p));
  std::vector<double> m0 = to_vector(st[0]), m1 = to_vector(st[1]), M(6);
  for (int r = 0; r < 6; ++r)
    M[r] = std::max(m0[r], m1[r]);
  std::vector<double> sum(24, 0);
  for (int p = 0; p < 2; ++p) {
    k::cross_entropy_rebase(space, st[p], to_view<float>(M));
    const auto v = to_vector(st[p]);
    for (int i = 0; i < 24; ++i)
      sum[i] = i < 6 ? v[i] : sum[i] + v[i];
  }
  k::FView loss, lse;
  k::cross_entropy_from_stats(space, to_view<float>(sum), 0.1, 40, 1e-3, loss, lse);
  const auto ref = ref_cross_entropy(whole, 1, x, t, std::vector<double>(6, 1.0), 0.1, 1e-3);
  expect_close(to_vector(lse), ref.lse, 2e-6, "lse");
  expect_close(to_vector(loss), ref.loss, 2e-5, "loss");
}

TEST(FusedCrossEntropy, Errors) {
  const Shape s{{"b", 2}, {"v", 3}};
  const mtk::ExecSpace space;
  expect_error(
      [&] {
        k::cross_entropy_stats(space, s, to_view<float>({1, 2, 3, 4, 5, 6}), 2,
                               to_view<I32>({0, 1}), 0);
      },
      {"mtk::kernels::cross_entropy", "dim 2", "[b=2, v=3]"});
  expect_error(
      [&] {
        k::cross_entropy_stats(space, s, to_view<float>({1, 2, 3, 4, 5, 6}), 1, to_view<I32>({0}),
                               0);
      },
      {"mtk::kernels::cross_entropy_stats", "1 values for 2 rows"});
  k::FView st = to_view<float>({1, 2, 3, 4, 5, 6, 7});
  expect_error(
      [&] {
        k::cross_entropy_rebase(space, st, to_view<float>({0, 0}));
      },
      {"mtk::kernels::cross_entropy_rebase", "7 values for 2 rows"});
}

}  // namespace

// ------------------------------------------------------------------ layer norm

namespace {

struct RefNorm {
  std::vector<double> y, dx, dscale, dbias;
};

// Unfused layer norm over `dim` and the gradient of sum(dy * y), in double.
RefNorm ref_layer_norm(const Shape& s, int dim, const std::vector<double>& x,
                       const std::vector<double>& scale, const std::vector<double>& bias,
                       const std::vector<double>& dy, double eps) {
  const mtk::Around a(s, dim);
  const std::int64_t n = a.n, inner = a.inner, rows = a.outer * a.inner;
  RefNorm r{std::vector<double>(x.size()), std::vector<double>(x.size()),
            std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t base = (row / inner) * n * inner + row % inner;
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < n; ++j)
      mean += x[base + j * inner] / n;
    for (std::int64_t j = 0; j < n; ++j)
      var += (x[base + j * inner] - mean) * (x[base + j * inner] - mean) / n;
    const double rstd = 1 / std::sqrt(var + eps);
    double a1 = 0, a2 = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t k = base + j * inner;
      const double xh = (x[k] - mean) * rstd;
      r.y[k] = xh * scale[j] + bias[j];
      r.dscale[j] += dy[k] * xh;
      r.dbias[j] += dy[k];
      a1 += dy[k] * scale[j];
      a2 += dy[k] * scale[j] * xh;
    }
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t k = base + j * inner;
      const double xh = (x[k] - mean) * rstd;
      r.dx[k] = rstd * (dy[k] * scale[j] - a1 / n - xh * a2 / n);
    }
  }
  return r;
}

TEST(FusedLayerNorm, ForwardAndGradientMatchTheUnfusedFormula) {
  for (const bool device : {false, true})  // the GPU's form too: teams per row, thread per element
    for (const auto& [s, dim] : std::vector<std::pair<Shape, int>>{
             {Shape{{"b", 6}, {"d", 33}}, 1}, {Shape{{"a", 3}, {"d", 10}, {"c", 5}}, 1}}) {
      const DevicePaths paths(device);
      SCOPED_TRACE(s.to_string() + (device ? " (device paths)" : ""));
      const mtk::Around a(s, dim);
      auto x = random_values(s.num_elements(), -3, 3, 11);
      for (auto& v : x)
        v += 100;  // a large mean: the centred second pass keeps the variance exact
      const auto scale = random_values(a.n, 0.5, 1.5, 12), bias = random_values(a.n, -1, 1, 13);
      const auto dy = random_values(s.num_elements(), -1, 1, 14);
      const double eps = 1e-5;
      const auto ref = ref_layer_norm(s, dim, x, scale, bias, dy, eps);
      const mtk::ExecSpace space;
      const auto X = to_view<float>(x), S = to_view<float>(scale), B = to_view<float>(bias),
                 DY = to_view<float>(dy);
      auto s1 = k::layer_norm_sums(space, s, X, dim, k::FView(), a.n);
      auto s2 = k::layer_norm_sums(space, s, X, dim, s1, a.n);
      k::FView mean, rstd;
      k::layer_norm_moments(space, s1, s2, a.n, eps, mean, rstd);
      expect_close(to_vector(k::layer_norm_apply(space, s, X, dim, mean, rstd, S, B)), ref.y, 2e-5,
                   "y");
      auto sums = k::layer_norm_grad_sums(space, s, X, dim, mean, rstd, S, DY);
      k::FView dx, dyh;
      k::layer_norm_grad_apply(space, s, X, dim, mean, rstd, S, DY, sums, a.n, dx, dyh);
      expect_close(to_vector(dx), ref.dx, 1e-4, "dx");
      // d scale = dy xhat summed over rows.
      const auto h = to_vector(dyh);
      std::vector<double> dscale(a.n, 0.0);
      for (std::int64_t k = 0; k < s.num_elements(); ++k)
        dscale[(k / a.inner) % a.n] += h[k];
      expect_close(dscale, ref.dscale, 1e-4, "dscale");
    }
}

TEST(FusedLayerNorm, SliceSumsAddUpToTheWholeRow) {
  // `dim` split in two slices (as over a mesh dim): the slices' sums, added, and the centred sums
  // from the whole-row mean give the whole row's moments.
  const Shape whole{{"b", 4}, {"d", 16}}, half{{"b", 4}, {"d", 8}};
  const auto x = random_values(whole.num_elements(), -2, 5, 21);
  std::vector<std::vector<double>> part(2);
  for (int p = 0; p < 2; ++p)
    for (int r = 0; r < 4; ++r)
      for (int j = 0; j < 8; ++j)
        part[p].push_back(x[r * 16 + p * 8 + j]);
  const mtk::ExecSpace space;
  std::vector<double> s1(4, 0.0), s2(4, 0.0);
  for (int p = 0; p < 2; ++p) {
    const auto v =
        to_vector(k::layer_norm_sums(space, half, to_view<float>(part[p]), 1, k::FView(), 16));
    for (int r = 0; r < 4; ++r)
      s1[r] += v[r];
  }
  for (int p = 0; p < 2; ++p) {
    const auto v = to_vector(
        k::layer_norm_sums(space, half, to_view<float>(part[p]), 1, to_view<float>(s1), 16));
    for (int r = 0; r < 4; ++r)
      s2[r] += v[r];
  }
  const auto X = to_view<float>(x);
  const auto w1 = k::layer_norm_sums(space, whole, X, 1, k::FView(), 16);
  expect_close(s1, to_vector(w1), 1e-6, "sum");
  expect_close(s2, to_vector(k::layer_norm_sums(space, whole, X, 1, w1, 16)), 1e-5, "centred");
}

TEST(FusedLayerNorm, Errors) {
  const Shape s{{"b", 2}, {"d", 3}};
  const mtk::ExecSpace space;
  const auto x = to_view<float>({1, 2, 3, 4, 5, 6});
  expect_error([&] { k::layer_norm_sums(space, s, x, 2, k::FView(), 3); },
               {"mtk::kernels::layer_norm_sums", "dim 2", "[b=2, d=3]"});
  const auto two = to_view<float>({1, 1});
  expect_error([&] { k::layer_norm_apply(space, s, x, 1, two, two, two, two); },
               {"mtk::kernels::layer_norm_apply", "scale holds 2 values, expected 3"});
}

}  // namespace

// ------------------------------------------------------------------ Adafactor

namespace {

TEST(FusedAdafactor, SecondMomentAndApplyMatchTheFormula) {
  const std::int64_t n = 37;
  const auto v = random_values(n, 0, 2, 31), g = random_values(n, -1, 1, 32),
             p = random_values(n, -1, 1, 33), m = random_values(n, -0.1, 0.1, 34);
  const double decay = 0.3, eps1 = 1e-30, clip = 1.7, scale = 0.05;
  const mtk::ExecSpace space;
  k::FView nv, u;
  k::adafactor_second_moment(space, to_view<float>(v), to_view<float>(g), to_view<float>({decay}),
                             static_cast<float>(eps1), nv, u);
  std::vector<double> ref_v(n), ref_u(n);
  for (std::int64_t i = 0; i < n; ++i) {
    ref_v[i] = decay * v[i] + (1 - decay) * (g[i] * g[i] + eps1);
    ref_u[i] = g[i] / std::sqrt(ref_v[i]);
  }
  expect_close(to_vector(nv), ref_v, 1e-6, "v");
  expect_close(to_vector(u), ref_u, 1e-6, "update");
  for (double beta1 : {0.0, 0.9}) {
    k::FView np, nm;
    k::adafactor_apply(space, to_view<float>(p), to_view<float>(m), u, to_view<float>({clip}),
                       to_view<float>({scale}), beta1, np, nm);
    std::vector<double> ref_p(n), ref_m(n);
    for (std::int64_t i = 0; i < n; ++i) {
      const double s = ref_u[i] / clip * scale;
      ref_m[i] = beta1 * m[i] + (1 - beta1) * s;
      ref_p[i] = p[i] - (beta1 > 0 ? ref_m[i] : s);
    }
    expect_close(to_vector(np), ref_p, 1e-6, "parameter");
    if (beta1 > 0)
      expect_close(to_vector(nm), ref_m, 1e-6, "momentum");
    else
      EXPECT_EQ(nm.extent(0), 0u);
  }
  expect_error(
      [&] {
        k::FView np, nm;
        k::adafactor_apply(space, to_view<float>(p), k::FView(), u, to_view<float>({1, 2}),
                           to_view<float>({scale}), 0.0, np, nm);
      },
      {"mtk::kernels::adafactor_apply", "2 values, not one"});
}

}  // namespace
