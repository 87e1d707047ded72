// Tests of the elementwise kernels (kernels/elementwise.hpp) against naive host loops.

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
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace kernel_test_names;

double ref_gelu(double x) {
  const double c = std::sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

// ------------------------------------------------------------------ fill, unary

TEST(KernelsElementwise, Fill) {
  auto f = to_vector(k::fill<float>(mtk::ExecSpace(), 7, 2.5f));
  ASSERT_EQ(f.size(), 7u);
  for (double v : f)
    EXPECT_EQ(v, 2.5);
  auto i = to_vector(k::fill<I32>(mtk::ExecSpace(), 5, -3));
  ASSERT_EQ(i.size(), 5u);
  for (double v : i)
    EXPECT_EQ(v, -3);
  EXPECT_EQ(k::fill<float>(mtk::ExecSpace(), 0, 1.f).extent(0), 0u);
}

struct UnaryCase {
  UnaryFn fn;
  double lo, hi, p;
  std::function<double(double, double)> ref;
};

std::vector<UnaryCase> unary_cases() {
  return {
      {UnaryFn::identity, -4, 4, 0, [](double x, double) { return x; }},
      {UnaryFn::negative, -4, 4, 0, [](double x, double) { return -x; }},
      {UnaryFn::abs, -4, 4, 0, [](double x, double) { return std::fabs(x); }},
      {UnaryFn::exp, -4, 4, 0, [](double x, double) { return std::exp(x); }},
      {UnaryFn::log, 0.05, 10, 0, [](double x, double) { return std::log(x); }},
      {UnaryFn::sqrt, 0.0, 10, 0, [](double x, double) { return std::sqrt(x); }},
      {UnaryFn::rsqrt, 0.05, 10, 0, [](double x, double) { return 1.0 / std::sqrt(x); }},
      {UnaryFn::square, -4, 4, 0, [](double x, double) { return x * x; }},
      {UnaryFn::reciprocal, 0.1, 10, 0, [](double x, double) { return 1.0 / x; }},
      {UnaryFn::relu, -4, 4, 0, [](double x, double) { return x > 0 ? x : 0.0; }},
      {UnaryFn::gelu, -6, 6, 0, [](double x, double) { return ref_gelu(x); }},
      {UnaryFn::gelu_grad, -6, 6, 0,
       [](double x, double) {
         const double h = 1e-5;
         return (ref_gelu(x + h) - ref_gelu(x - h)) / (2 * h);
       }},
      {UnaryFn::tanh, -5, 5, 0, [](double x, double) { return std::tanh(x); }},
      {UnaryFn::sigmoid, -30, 30, 0, [](double x, double) { return 1.0 / (1.0 + std::exp(-x)); }},
      {UnaryFn::sign, -4, 4, 0,
       [](double x, double) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
      {UnaryFn::pow_scalar, 0.1, 5, 1.7, [](double x, double p) { return std::pow(x, p); }},
      {UnaryFn::pow_scalar, -3, 3, 2.0, [](double x, double p) { return std::pow(x, p); }},
      {UnaryFn::add_scalar, -4, 4, 0.75, [](double x, double p) { return x + p; }},
      {UnaryFn::mul_scalar, -4, 4, -2.5, [](double x, double p) { return x * p; }},
      {UnaryFn::relu_mask, -4, 4, 0, [](double x, double) { return x > 0 ? 1.0 : 0.0; }},
  };
}

TEST(KernelsElementwise, UnaryFloatEveryFunction) {
  unsigned seed = 1;
  for (const auto& c : unary_cases()) {
    SCOPED_TRACE(mtk::unary_name(c.fn));
    auto x = random_values(1000, c.lo, c.hi, seed++);
    x[0] = c.lo;
    x[1] = c.hi;
    if (c.lo < 0 && c.hi > 0)
      x[2] = 0.0;
    for (auto& v : x)
      v = static_cast<float>(v);  // the reference sees the float inputs
    auto y = to_vector(k::unary(mtk::ExecSpace(), c.fn, to_view<float>(x), c.p));
    ASSERT_EQ(y.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double r = c.ref(x[i], c.p);
      EXPECT_NEAR(y[i], r, 2e-6 * std::max(1.0, std::fabs(r))) << "x = " << x[i];
    }
  }
}

TEST(KernelsElementwise, GeluGradIsTheDerivativeOfTheGeluKernel) {
  // Central finite difference of the float gelu kernel itself.
  const double h = 1e-2;
  auto x = random_values(200, -5, 5, 7);
  std::vector<double> xp(x), xm(x);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(x[i]);
    xp[i] = x[i] + h;
    xm[i] = x[i] - h;
  }
  auto gp = to_vector(k::unary(mtk::ExecSpace(), UnaryFn::gelu, to_view<float>(xp)));
  auto gm = to_vector(k::unary(mtk::ExecSpace(), UnaryFn::gelu, to_view<float>(xm)));
  auto d = to_vector(k::unary(mtk::ExecSpace(), UnaryFn::gelu_grad, to_view<float>(x)));
  for (size_t i = 0; i < x.size(); ++i) {
    const double fd = (gp[i] - gm[i]) / (static_cast<float>(xp[i]) - static_cast<float>(xm[i]));
    EXPECT_NEAR(d[i], fd, 2e-3) << "x = " << x[i];
  }
  // Known values: gelu(0) = 0, gelu'(0) = 0.5.
  auto z = to_vector(k::unary(mtk::ExecSpace(), UnaryFn::gelu_grad, to_view<float>({0.0})));
  EXPECT_FLOAT_EQ(z[0], 0.5f);
}

TEST(KernelsElementwise, UnaryFloatEdgeValues) {
  auto y = to_vector(k::unary(mtk::ExecSpace(), UnaryFn::sigmoid, to_view<float>({-200.0, 200.0})));
  EXPECT_EQ(y[0], 0.0);
  EXPECT_EQ(y[1], 1.0);
  auto r =
      to_vector(k::unary(mtk::ExecSpace(), UnaryFn::relu, to_view<float>({-0.0, 0.0, -1e-30})));
  for (double v : r)
    EXPECT_EQ(v, 0.0);
  EXPECT_EQ(k::unary(mtk::ExecSpace(), UnaryFn::exp, k::FView("empty", 0)).extent(0), 0u);
}

TEST(KernelsElementwise, UnaryInt32) {
  auto x = random_ints(500, -1000, 1000, 3);
  x[0] = 0;
  x[1] = -1;
  x[2] = 1;
  struct Case {
    UnaryFn fn;
    double p;
    std::function<double(double)> ref;
  };
  const std::vector<Case> cases = {
      {UnaryFn::identity, 0, [](double v) { return v; }},
      {UnaryFn::negative, 0, [](double v) { return -v; }},
      {UnaryFn::abs, 0, [](double v) { return std::fabs(v); }},
      {UnaryFn::square, 0, [](double v) { return v * v; }},
      {UnaryFn::sign, 0, [](double v) { return v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0); }},
      {UnaryFn::add_scalar, 5, [](double v) { return v + 5; }},
      {UnaryFn::add_scalar, -7, [](double v) { return v - 7; }},
      {UnaryFn::mul_scalar, 3, [](double v) { return v * 3; }},
      {UnaryFn::mul_scalar, -2, [](double v) { return v * -2; }},
      {UnaryFn::relu, 0, [](double v) { return v > 0 ? v : 0.0; }},
      {UnaryFn::relu_mask, 0, [](double v) { return v > 0 ? 1.0 : 0.0; }},
      {UnaryFn::pow_scalar, 2, [](double v) { return v * v; }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(mtk::unary_name(c.fn));
    auto y = to_vector(k::unary(mtk::ExecSpace(), c.fn, to_view<I32>(x), c.p));
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(y[i], c.ref(x[i])) << "x = " << x[i];
  }
  // Functions computed through double and truncated toward zero.
  auto s = to_vector(k::unary(mtk::ExecSpace(), UnaryFn::sqrt, to_view<I32>({0, 1, 8, 9, 10})));
  EXPECT_EQ(s, (std::vector<double>{0, 1, 2, 3, 3}));
  auto l =
      to_vector(k::unary(mtk::ExecSpace(), UnaryFn::log, to_view<I32>({0})));  // -inf saturates
  EXPECT_EQ(l[0], -2147483648.0);
}

// Integer powers are exact (a GPU's pow is not correctly rounded: 202^2 gave 40803), saturate at
// the int32 range and truncate toward zero for negative exponents, as the double pow would.
TEST(KernelsElementwise, IntegerPowersAreExact) {
  const double max = 2147483647, min = -2147483648.0;
  const std::vector<std::vector<double>> cases = {// x, e, x^e
                                                  {202, 2, 40804},
                                                  {-202, 2, 40804},
                                                  {46340, 2, 2147395600},
                                                  {46341, 2, max},
                                                  {-2, 31, min},
                                                  {2, 31, max},
                                                  {-3, 3, -27},
                                                  {-2, 32, max},
                                                  {0, 0, 1},
                                                  {5, 0, 1},
                                                  {0, 3, 0},
                                                  {0, -1, max},
                                                  {-1, -3, -1},
                                                  {1, -7, 1},
                                                  {2, -1, 0},
                                                  {-1, 1073741825, -1},
                                                  {7, 11, 1977326743}};
  std::vector<double> x, e, want;
  for (const auto& c : cases) {
    x.push_back(c[0]);
    e.push_back(c[1]);
    want.push_back(c[2]);
  }
  const Shape s{{"i", static_cast<std::int64_t>(cases.size())}};
  const mtk::ExecSpace space;
  EXPECT_EQ(to_vector(k::binary(space, BinaryFn::pow, s, to_view<I32>(x), s, to_view<I32>(e), s)),
            want);
  for (const auto& c : cases) {
    const auto y = to_vector(k::unary(space, UnaryFn::pow_scalar, to_view<I32>({c[0]}), c[1]));
    EXPECT_EQ(y[0], c[2]) << c[0] << "^" << c[1];
  }
  // A fractional scalar exponent goes through double pow, truncated.
  EXPECT_EQ(to_vector(k::unary(space, UnaryFn::pow_scalar, to_view<I32>({10}), 0.5))[0], 3.0);
}

// ------------------------------------------------------------------ binary, compare, where

struct BroadcastCase {
  std::string name;
  Shape a, b, out;
};

std::vector<BroadcastCase> broadcast_cases() {
  return {
      {"same shape",
       {{"b", 3}, {"l", 4}, {"d", 5}},
       {{"b", 3}, {"l", 4}, {"d", 5}},
       {{"b", 3}, {"l", 4}, {"d", 5}}},
      {"bias add [b,l,d]+[d]",
       {{"b", 3}, {"l", 4}, {"d", 5}},
       {{"d", 5}},
       {{"b", 3}, {"l", 4}, {"d", 5}}},
      {"[b,l]*[l]", {{"b", 6}, {"l", 7}}, {{"l", 7}}, {{"b", 6}, {"l", 7}}},
      {"[l]*[b,l] (suffix first operand)", {{"l", 7}}, {{"b", 6}, {"l", 7}}, {{"b", 6}, {"l", 7}}},
      {"suffix of two dims",
       {{"b", 2}, {"l", 3}, {"d", 4}},
       {{"l", 3}, {"d", 4}},
       {{"b", 2}, {"l", 3}, {"d", 4}}},
      {"outer [x]+[y]->[x,y]", {{"x", 5}}, {{"y", 6}}, {{"x", 5}, {"y", 6}}},
      {"outer [x]+[y]->[y,x]", {{"x", 5}}, {{"y", 6}}, {{"y", 6}, {"x", 5}}},
      {"out in another order",
       {{"b", 3}, {"l", 4}, {"d", 5}},
       {{"d", 5}, {"b", 3}},
       {{"l", 4}, {"d", 5}, {"b", 3}}},
      {"both transposed", {{"d", 5}, {"l", 4}}, {{"l", 4}, {"d", 5}}, {{"l", 4}, {"d", 5}}},
      {"non-suffix subset [b,d] of [b,l,d]",
       {{"b", 3}, {"l", 4}, {"d", 5}},
       {{"b", 3}, {"d", 5}},
       {{"b", 3}, {"l", 4}, {"d", 5}}},
      {"scalar", {{"b", 3}, {"l", 4}}, {}, {{"b", 3}, {"l", 4}}},
      {"scalar first", {}, {{"b", 3}, {"l", 4}}, {{"b", 3}, {"l", 4}}},
      {"rank 0", {}, {}, {}},
      {"empty dim", {{"b", 0}, {"l", 4}}, {{"l", 4}}, {{"b", 0}, {"l", 4}}},
  };
}

double ref_binary(BinaryFn fn, double a, double b, bool integer) {
  switch (fn) {
    case BinaryFn::add:
      return a + b;
    case BinaryFn::subtract:
      return a - b;
    case BinaryFn::multiply:
      return a * b;
    case BinaryFn::divide:
      return integer ? static_cast<double>(static_cast<long>(a) / static_cast<long>(b)) : a / b;
    case BinaryFn::maximum:
      return std::max(a, b);
    case BinaryFn::minimum:
      return std::min(a, b);
    case BinaryFn::pow:
      return integer ? std::trunc(std::pow(a, b)) : std::pow(a, b);
  }
  return 0;
}

const std::vector<BinaryFn> kBinaryFns = {BinaryFn::add,    BinaryFn::subtract, BinaryFn::multiply,
                                          BinaryFn::divide, BinaryFn::maximum,  BinaryFn::minimum,
                                          BinaryFn::pow};

template <class T>
void check_binary(bool integer) {
  unsigned seed = 11;
  for (const auto& c : broadcast_cases()) {
    for (BinaryFn fn : kBinaryFns) {
      SCOPED_TRACE(c.name + " / " + mtk::binary_name(fn));
      const bool pow = fn == BinaryFn::pow;
      std::vector<double> a, b;
      if (integer) {
        a = random_ints(c.a.num_elements(), pow ? -3 : -20, pow ? 3 : 20, seed++);
        b = random_ints(c.b.num_elements(), pow ? 0 : 1, pow ? 4 : 9, seed++);
        if (!pow)
          for (size_t i = 0; i < b.size(); i += 2)
            b[i] = -b[i];  // nonzero, both signs
      } else {
        a = random_values(c.a.num_elements(), pow ? 0.1 : -5, 5, seed++);
        b = random_values(c.b.num_elements(), pow ? -2 : 0.5, 3, seed++);
        for (auto& v : a)
          v = static_cast<float>(v);
        for (auto& v : b)
          v = static_cast<float>(v);
      }
      auto z = to_vector(
          k::binary<T>(mtk::ExecSpace(), fn, c.a, to_view<T>(a), c.b, to_view<T>(b), c.out));
      ASSERT_EQ(static_cast<std::int64_t>(z.size()), c.out.num_elements());
      for (std::int64_t i = 0; i < c.out.num_elements(); ++i) {
        const double r = ref_binary(fn, a[static_cast<size_t>(ref_offset(c.out, c.a, i))],
                                    b[static_cast<size_t>(ref_offset(c.out, c.b, i))], integer);
        if (integer)
          ASSERT_EQ(z[static_cast<size_t>(i)], r) << "at " << i;
        else
          ASSERT_NEAR(z[static_cast<size_t>(i)], r, 2e-6 * std::max(1.0, std::fabs(r)))
              << "at " << i;
      }
    }
  }
}

TEST(KernelsElementwise, BinaryFloatBroadcasting) {
  check_binary<float>(false);
}
TEST(KernelsElementwise, BinaryInt32Broadcasting) {
  check_binary<I32>(true);
}

TEST(KernelsElementwise, BinaryInt32DivideByZeroIsZero) {
  Shape s{{"x", 3}};
  auto z = to_vector(k::binary<I32>(mtk::ExecSpace(), BinaryFn::divide, s, to_view<I32>({7, -7, 0}),
                                    s, to_view<I32>({0, 2, 0}), s));
  EXPECT_EQ(z, (std::vector<double>{0, -3, 0}));
}

TEST(KernelsElementwise, BinaryLarge) {
  // Big enough that a parallel backend splits it.
  Shape out{{"b", 16}, {"l", 128}, {"d", 96}}, bias{{"d", 96}}, tr{{"d", 96}, {"b", 16}};
  auto a = random_values(out.num_elements(), -1, 1, 5);
  auto b = random_values(bias.num_elements(), -1, 1, 6);
  auto t = random_values(tr.num_elements(), -1, 1, 7);
  for (auto& v : a)
    v = static_cast<float>(v);
  for (auto& v : b)
    v = static_cast<float>(v);
  for (auto& v : t)
    v = static_cast<float>(v);
  auto z = to_vector(k::binary<float>(mtk::ExecSpace(), BinaryFn::add, out, to_view<float>(a), bias,
                                      to_view<float>(b), out));
  auto w = to_vector(k::binary<float>(mtk::ExecSpace(), BinaryFn::multiply, out, to_view<float>(a),
                                      tr, to_view<float>(t), out));
  for (std::int64_t i = 0; i < out.num_elements(); ++i) {
    const auto u = static_cast<size_t>(i);
    ASSERT_EQ(z[u], static_cast<float>(a[u] + b[static_cast<size_t>(i % 96)]));
    ASSERT_EQ(w[u], static_cast<float>(a[u] * t[static_cast<size_t>(ref_offset(out, tr, i))]));
  }
}

TEST(KernelsElementwise, BinaryErrors) {
  Shape a{{"x", 3}}, b{{"x", 4}}, y{{"y", 2}};
  auto va = to_view<float>({1, 2, 3});
  auto vb = to_view<float>({1, 2, 3, 4});
  expect_error([&] { k::binary<float>(mtk::ExecSpace(), BinaryFn::add, a, va, b, vb, a); },
               {"mtk::kernels::binary", "[x=3]", "[x=4]"});
  expect_error([&] { k::binary<float>(mtk::ExecSpace(), BinaryFn::add, a, va, a, va, y); },
               {"mtk::kernels::binary", "'x'", "[x=3]", "[y=2]"});
  expect_error([&] { k::binary<float>(mtk::ExecSpace(), BinaryFn::add, a, vb, a, va, a); },
               {"mtk::kernels::binary", "4 elements", "[x=3]"});
  expect_error([&] { k::compare<float>(mtk::ExecSpace(), CompareFn::less, a, va, b, vb, b); },
               {"mtk::kernels::compare", "[x=3]", "[x=4]"});
  expect_error([&] { k::where(mtk::ExecSpace(), a, va, a, va, b, vb, a); },
               {"mtk::kernels::where", "[x=4]", "[x=3]"});
  expect_error([&] { k::axpy<float>(mtk::ExecSpace(), 1.f, va, vb); },
               {"mtk::kernels::axpy", "3", "4"});
  expect_error([&] { k::axpby(mtk::ExecSpace(), 1.f, va, 2.f, vb); },
               {"mtk::kernels::axpby", "3", "4"});
  expect_error([&] { k::range<float>(mtk::ExecSpace(), a, 1, 0); },
               {"mtk::kernels::range", "[x=3]"});
}

double ref_compare(CompareFn fn, double a, double b) {
  switch (fn) {
    case CompareFn::less:
      return a < b;
    case CompareFn::less_equal:
      return a <= b;
    case CompareFn::greater:
      return a > b;
    case CompareFn::greater_equal:
      return a >= b;
    case CompareFn::equal:
      return a == b;
    case CompareFn::not_equal:
      return a != b;
    case CompareFn::near_equal:  // these cases compare small integers: exactly equal ones
      return a == b;
  }
  return -1;
}

template <class T>
void check_compare() {
  const std::vector<CompareFn> fns = {
      CompareFn::less,  CompareFn::less_equal, CompareFn::greater,   CompareFn::greater_equal,
      CompareFn::equal, CompareFn::not_equal,  CompareFn::near_equal};
  unsigned seed = 21;
  for (const auto& c : broadcast_cases()) {
    for (CompareFn fn : fns) {
      SCOPED_TRACE(c.name + " / " + mtk::compare_name(fn));
      // Small integers (also as floats) so that equality happens often.
      auto a = random_ints(c.a.num_elements(), -2, 2, seed++);
      auto b = random_ints(c.b.num_elements(), -2, 2, seed++);
      auto z = to_vector(
          k::compare<T>(mtk::ExecSpace(), fn, c.a, to_view<T>(a), c.b, to_view<T>(b), c.out));
      ASSERT_EQ(static_cast<std::int64_t>(z.size()), c.out.num_elements());
      for (std::int64_t i = 0; i < c.out.num_elements(); ++i)
        ASSERT_EQ(z[static_cast<size_t>(i)],
                  ref_compare(fn, a[static_cast<size_t>(ref_offset(c.out, c.a, i))],
                              b[static_cast<size_t>(ref_offset(c.out, c.b, i))]))
            << "at " << i;
    }
  }
}

TEST(KernelsElementwise, CompareFloat) {
  check_compare<float>();
}
TEST(KernelsElementwise, CompareInt32) {
  check_compare<I32>();
}

// near_equal: equal up to 2^-13 of the larger magnitude (rounding differences of one dot product
// computed at two positions of a matrix), exact for zeros, infinities and integers.
TEST(KernelsElementwise, NearEqualIsEqualityUpToRounding) {
  const float inf = std::numeric_limits<float>::infinity(), tol = mtk::kNearEqualRelative;
  const std::vector<double> a = {1.0, 1.0,  1.0, -3.5,  0.0,    0.0, inf,
                                 inf, -inf, 2.0, 1e-30, 1000.0, 1.0};
  const std::vector<double> b = {1.0,
                                 std::nextafter(1.0f, 2.0f),
                                 1.0 + 0.5 * tol,
                                 -3.5 * (1 + tol / 2),
                                 1e-38,
                                 -0.0,
                                 inf,
                                 -inf,
                                 -inf,
                                 2.0 * (1 + 2 * tol),
                                 2e-30,
                                 1000.0 - 0.12,
                                 -1.0};
  const std::vector<double> want = {1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0};
  const Shape s({{"x", static_cast<std::int64_t>(a.size())}});
  const auto z = to_vector(k::compare<float>(mtk::ExecSpace(), CompareFn::near_equal, s,
                                             to_view<float>(a), s, to_view<float>(b), s));
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(z[i], want[i]) << a[i] << " vs " << b[i];
  const std::vector<double> ia = {1, 2, 100000}, ib = {1, 3, 100001};
  const Shape t({{"x", 3}});
  const auto zi = to_vector(k::compare<I32>(mtk::ExecSpace(), CompareFn::near_equal, t,
                                            to_view<I32>(ia), t, to_view<I32>(ib), t));
  EXPECT_EQ(zi, (std::vector<double>{1, 0, 0}));
}

TEST(KernelsElementwise, Where) {
  struct Case {
    Shape cond, a, b, out;
  };
  const std::vector<Case> cases = {
      {{{"b", 3}, {"l", 4}}, {{"b", 3}, {"l", 4}}, {{"b", 3}, {"l", 4}}, {{"b", 3}, {"l", 4}}},
      {{{"b", 3}, {"l", 4}},
       {{"b", 3}, {"l", 4}, {"d", 5}},
       {{"d", 5}},
       {{"b", 3}, {"l", 4}, {"d", 5}}},
      {{{"l", 4}}, {{"d", 5}, {"b", 3}}, {}, {{"d", 5}, {"l", 4}, {"b", 3}}},
  };
  unsigned seed = 31;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.out.to_string());
    auto cond = random_ints(c.cond.num_elements(), 0, 1, seed++);
    cond[0] = -1;  // any nonzero is true
    auto a = random_values(c.a.num_elements(), -1, 1, seed++);
    auto b = random_values(c.b.num_elements(), 2, 3, seed++);
    auto z = to_vector(k::where(mtk::ExecSpace(), c.cond, to_view<float>(cond), c.a,
                                to_view<float>(a), c.b, to_view<float>(b), c.out));
    for (std::int64_t i = 0; i < c.out.num_elements(); ++i) {
      const bool t = cond[static_cast<size_t>(ref_offset(c.out, c.cond, i))] != 0;
      const double r = t ? a[static_cast<size_t>(ref_offset(c.out, c.a, i))]
                         : b[static_cast<size_t>(ref_offset(c.out, c.b, i))];
      ASSERT_EQ(z[static_cast<size_t>(i)], static_cast<float>(r)) << "at " << i;
    }
  }
}

// ------------------------------------------------------------------ cast, axpy, axpby, range

TEST(KernelsElementwise, Cast) {
  auto f = to_view<float>({-2.7, -2.0, -0.5, 0.0, 0.5, 2.7, 3.0, 1e6});
  EXPECT_EQ(to_vector(k::cast<I32, float>(mtk::ExecSpace(), f)),
            (std::vector<double>{-2, -2, 0, 0, 0, 2, 3, 1000000}));
  auto i = to_view<I32>({-5, 0, 7, 16777217});
  EXPECT_EQ(to_vector(k::cast<float, I32>(mtk::ExecSpace(), i)),
            (std::vector<double>{-5, 0, 7, 16777216}));
  EXPECT_EQ(to_vector(k::cast<float, float>(mtk::ExecSpace(), f)), to_vector(f));
  EXPECT_EQ(to_vector(k::cast<I32, I32>(mtk::ExecSpace(), i)), to_vector(i));
  auto copy = k::cast<float, float>(mtk::ExecSpace(), f);
  EXPECT_NE(copy.data(), f.data());
}

TEST(KernelsElementwise, AxpyAxpby) {
  auto x = random_values(300, -1, 1, 41), y = random_values(300, -1, 1, 42);
  auto vy = to_view<float>(y);
  k::axpy(mtk::ExecSpace(), 0.5f, to_view<float>(x), vy);
  auto r = to_vector(vy);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_FLOAT_EQ(r[i], static_cast<float>(y[i]) + 0.5f * static_cast<float>(x[i]));
  auto xi = random_ints(100, -50, 50, 43), yi = random_ints(100, -50, 50, 44);
  auto vyi = to_view<I32>(yi);
  k::axpy<I32>(mtk::ExecSpace(), -3, to_view<I32>(xi), vyi);
  auto ri = to_vector(vyi);
  for (size_t i = 0; i < xi.size(); ++i)
    EXPECT_EQ(ri[i], yi[i] - 3 * xi[i]);
  auto z = to_vector(k::axpby(mtk::ExecSpace(), 2.f, to_view<float>(x), -0.25f, to_view<float>(y)));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_FLOAT_EQ(z[i], 2.f * static_cast<float>(x[i]) - 0.25f * static_cast<float>(y[i]));
}

TEST(KernelsElementwise, Range) {
  Shape s{{"a", 2}, {"b", 3}, {"c", 4}};
  for (int dim = 0; dim < 3; ++dim) {
    for (std::int64_t origin : {0, 5}) {
      auto f = to_vector(k::range<float>(mtk::ExecSpace(), s, dim, origin));
      auto i = to_vector(k::range<I32>(mtk::ExecSpace(), s, dim, origin));
      for (std::int64_t e = 0; e < s.num_elements(); ++e) {
        const double r = static_cast<double>(origin + unflatten(s, e)[static_cast<size_t>(dim)]);
        ASSERT_EQ(f[static_cast<size_t>(e)], r);
        ASSERT_EQ(i[static_cast<size_t>(e)], r);
      }
    }
  }
}

TEST(KernelsBinary, EveryBroadcastPatternMatchesTheReference) {
  // Operands made of random subsets of the output's dims in random orders: runs of trailing
  // outputs where an operand is contiguous, constant or neither, on every code path.
  const std::vector<mtk::Dimension> dims = {{"a", 3}, {"b", 9}, {"c", 2}, {"d", 16}};
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    auto o = dims;
    std::shuffle(o.begin(), o.end(), rng);
    auto pick = [&] {
      std::vector<mtk::Dimension> d;
      for (const auto& x : o)
        if (rng() % 3 != 0)
          d.push_back(x);
      if (rng() % 2)
        std::shuffle(d.begin(), d.end(), rng);
      return mtk::Shape(d);
    };
    const mtk::Shape out(o), as = pick(), bs = pick();
    SCOPED_TRACE(as.to_string() + " + " + bs.to_string() + " -> " + out.to_string());
    auto a = random_values(as.num_elements(), -1, 1, static_cast<unsigned>(trial));
    auto b = random_values(bs.num_elements(), -1, 1, static_cast<unsigned>(trial + 1000));
    for (auto& v : a)
      v = static_cast<float>(v);
    for (auto& v : b)
      v = static_cast<float>(v);
    auto z = to_vector(k::binary<float>(mtk::ExecSpace(), BinaryFn::subtract, as, to_view<float>(a),
                                        bs, to_view<float>(b), out));
    ASSERT_EQ(static_cast<std::int64_t>(z.size()), out.num_elements());
    for (std::int64_t i = 0; i < out.num_elements(); ++i)
      ASSERT_EQ(z[static_cast<size_t>(i)],
                static_cast<float>(a[static_cast<size_t>(ref_offset(out, as, i))] -
                                   b[static_cast<size_t>(ref_offset(out, bs, i))]))
          << "at " << i;
  }
}

}  // namespace

// An operand whose leading and trailing dims are the output's, with dims broadcast in between
// (the attention bias [batch, length, memory] on logits [batch, heads, length, memory]).
TEST(KernelsBinary, LeadingAndTrailingDimsBroadcastInTheMiddle) {
  const mtk::Shape out{{"b", 3}, {"h", 4}, {"l", 5}, {"m", 6}};
  const mtk::Shape bias{{"b", 3}, {"l", 5}, {"m", 6}};
  const mtk::Shape mid{{"b", 3}, {"m", 6}};
  std::vector<double> x(static_cast<size_t>(out.num_elements())),
      y(static_cast<size_t>(bias.num_elements())), z(static_cast<size_t>(mid.num_elements()));
  for (size_t k = 0; k < x.size(); ++k)
    x[k] = 0.5 * static_cast<double>(k);
  for (size_t k = 0; k < y.size(); ++k)
    y[k] = 1000.0 + static_cast<double>(k);
  for (size_t k = 0; k < z.size(); ++k)
    z[k] = 7.0 * static_cast<double>(k);
  auto X = mtk::test::to_view<float>(x), Y = mtk::test::to_view<float>(y),
       Z = mtk::test::to_view<float>(z);
  auto sum = mtk::test::to_vector(
      mtk::kernels::binary<float>(mtk::ExecSpace(), mtk::BinaryFn::add, out, X, bias, Y, out));
  auto prod = mtk::test::to_vector(
      mtk::kernels::binary<float>(mtk::ExecSpace(), mtk::BinaryFn::multiply, mid, Z, out, X, out));
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t h = 0; h < 4; ++h)
      for (std::int64_t l = 0; l < 5; ++l)
        for (std::int64_t m = 0; m < 6; ++m) {
          const size_t k = static_cast<size_t>(((b * 4 + h) * 5 + l) * 6 + m);
          EXPECT_EQ(sum[k], x[k] + y[static_cast<size_t>((b * 5 + l) * 6 + m)]);
          EXPECT_EQ(prod[k], static_cast<double>(
                                 static_cast<float>(z[static_cast<size_t>(b * 6 + m)] * x[k])));
        }
}
