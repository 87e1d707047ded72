// Convolutions, transposed convolutions and pooling over 1 to 3 named spatial dims on one
// processor, against direct float64 loops (tests/spatial_reference.hpp): SAME and VALID, strides
// 1 and 2, odd and even filters, dilation; the gradients of input and filter; the errors.
#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/error.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/ops.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "mtk_invariance_check.hpp"
#include "spatial_reference.hpp"
#include <functional>
#include <string>
#include <vector>

namespace mtk::test {
namespace {

using nn::Padding;
using nn::SpatialDim;

struct Case {
  int rank;
  std::vector<std::int64_t> n, k, s, d;
  bool same;
};

std::string name_of(const Case& c) {
  std::string t = cat(c.rank, "-D ", c.same ? "SAME" : "VALID");
  for (int a = 0; a < c.rank; ++a)
    t += cat(" n", c.n[a], " k", c.k[a], " s", c.s[a], " d", c.d[a]);
  return t;
}

ConvGeom geom_of(const Case& c, std::int64_t cin, std::int64_t cout) {
  ConvGeom g;
  g.rank = c.rank;
  g.batch = 2;
  g.cin = cin;
  g.cout = cout;
  for (int a = 0; a < c.rank; ++a) {
    const size_t i = static_cast<size_t>(a);
    g.n[a] = c.n[i];
    g.k[a] = c.k[i];
    g.s[a] = c.s[i];
    g.d[a] = c.d[i];
  }
  g.plan(c.same);
  return g;
}

Shape spatial_shape(const ConvGeom& g, const std::int64_t* e, const std::string& channels,
                    std::int64_t c) {
  std::vector<Dimension> dims{{"b", g.batch}};
  for (int a = 0; a < g.rank; ++a)
    dims.push_back({cat("s", a), e[a]});
  dims.push_back({channels, c});
  return Shape(dims);
}

Shape filter_shape(const ConvGeom& g) {
  std::vector<Dimension> dims;
  for (int a = 0; a < g.rank; ++a)
    dims.push_back({cat("k", a), g.k[a]});
  dims.push_back({"c", g.cin});
  dims.push_back({"co", g.cout});
  return Shape(dims);
}

std::vector<SpatialDim> dims_of(const ConvGeom& g) {
  std::vector<SpatialDim> out;
  for (int a = 0; a < g.rank; ++a)
    out.push_back({cat("s", a), cat("k", a), g.s[a], g.d[a], "", g.k[a]});
  return out;
}

HostTensor floats_of(const Shape& s, const std::vector<double>& v) {
  return HostTensor::floats(s, std::vector<float>(v.begin(), v.end()));
}

void expect_values(const HostTensor& got, const Shape& shape, const std::vector<double>& want,
                   const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(got.size(), static_cast<std::int64_t>(want.size())) << what;
  double scale = 1e-6;
  for (double v : want)
    scale = std::max(scale, std::fabs(v));
  for (std::int64_t e = 0; e < got.size(); ++e)
    ASSERT_NEAR(got.at(e), want[static_cast<size_t>(e)], 2e-5 * scale) << what << " at " << e;
}

// Runs `build(x, aux)` with x, aux and the loss weights fed; fetches y, d/dx, d/daux.
std::vector<HostTensor> run_graph(const Shape& xs, const std::vector<double>& xv, const Shape& as,
                                  const std::vector<double>& av,
                                  const std::function<Tensor(Tensor, Tensor)>& build,
                                  const std::vector<double>& (*weights)(std::int64_t)) {
  Graph g;
  Tensor x = placeholder(g, "x", xs), aux = placeholder(g, "aux", as);
  Tensor y = build(x, aux);
  Tensor w = placeholder(g, "w", y.shape());
  auto grads = gradients(reduce_sum(y * w), {x, aux});
  std::vector<Tensor> fetch{y, grads[0]};
  if (grads[1].valid())
    fetch.push_back(grads[1]);
  auto p = lower(g, single_processor_mesh(), LayoutRules());
  const auto& wv = weights(y.shape().num_elements());
  return p->run({{x.id(), floats_of(xs, xv)},
                 {aux.id(), floats_of(as, av)},
                 {w.id(), floats_of(y.shape(), wv)}},
                fetch);
}

const std::vector<double>& loss_weights(std::int64_t n) {
  static std::vector<double> w;
  w = wave(n, 1.0, 0.7);
  return w;
}

const std::vector<Case>& conv_cases() {
  static const std::vector<Case> cases = {{1, {7}, {3}, {1}, {1}, true},
                                          {1, {8}, {4}, {2}, {1}, true},
                                          {1, {9}, {2}, {2}, {1}, false},
                                          {1, {8}, {3}, {1}, {2}, true},
                                          {1, {10}, {3}, {2}, {2}, false},
                                          {2, {6, 5}, {3, 2}, {1, 2}, {1, 1}, true},
                                          {2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, false},
                                          {2, {8, 8}, {4, 1}, {2, 1}, {1, 1}, true},
                                          {3, {4, 5, 3}, {3, 2, 3}, {1, 2, 1}, {1, 1, 1}, true},
                                          {3, {5, 4, 4}, {2, 3, 2}, {2, 1, 2}, {1, 1, 1}, false}};
  return cases;
}

TEST(Conv, EqualsTheReferenceWithGradients) {
  for (const Case& c : conv_cases()) {
    const ConvGeom g = geom_of(c, 3, 2);
    const Shape xs = spatial_shape(g, g.n, "c", g.cin), fs = filter_shape(g);
    const auto xv = wave(xs.num_elements(), 1.0), fv = wave(fs.num_elements(), 0.5, 1.3);
    const auto dims = dims_of(g);
    const Padding pad = c.same ? Padding::same : Padding::valid;
    auto out = run_graph(
        xs, xv, fs, fv, [&](Tensor x, Tensor f) { return nn::conv(x, f, dims, "c", "co", pad); },
        loss_weights);
    const ConvRef ref = conv_reference(g, xv, fv, loss_weights(g.batch * g.points(g.m) * g.cout));
    const std::string w = name_of(c);
    expect_values(out[0], spatial_shape(g, g.m, "co", g.cout), ref.y, w + " y");
    expect_values(out[1], xs, ref.dx, w + " d/dx");
    expect_values(out[2], fs, ref.df, w + " d/dfilter");
  }
}

TEST(Conv, TransposedIsTheInputGradient) {
  const std::vector<Case> cases = {{1, {8}, {3}, {2}, {1}, true},
                                   {1, {9}, {4}, {1}, {1}, true},
                                   {2, {6, 6}, {2, 3}, {2, 1}, {1, 1}, false},
                                   {2, {8, 6}, {3, 2}, {2, 2}, {1, 1}, true}};
  for (const Case& c : cases) {
    // The convolution of a [b, n..., c] input; its transpose maps [b, m..., co] to [b, n..., c].
    const ConvGeom g = geom_of(c, 3, 2);
    const Shape ts = spatial_shape(g, g.m, "co", g.cout), fs = filter_shape(g);
    const auto tv = wave(ts.num_elements(), 1.0), fv = wave(fs.num_elements(), 0.5, 1.3);
    const auto dims = dims_of(g);
    const Padding pad = c.same ? Padding::same : Padding::valid;
    auto out = run_graph(
        ts, tv, fs, fv,
        [&](Tensor t, Tensor f) { return nn::conv_transpose(t, f, dims, "c", "co", pad); },
        loss_weights);
    const Shape ys = spatial_shape(g, g.n, "c", g.cin);
    // y = conv's input gradient with weights t; d/dt = conv(w); d/df from the same loop.
    const auto wv = loss_weights(ys.num_elements());
    const ConvRef as_grad = conv_reference(g, wv, fv, tv);
    expect_values(out[0], ys, as_grad.dx, name_of(c) + " y");
    expect_values(out[1], ts, as_grad.y, name_of(c) + " d/dx");
    expect_values(out[2], fs, as_grad.df, name_of(c) + " d/dfilter");
  }
}

TEST(Pool, MaxAndAverageEqualTheReference) {
  const std::vector<Case> cases = {{2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, true},
                                   {2, {8, 6}, {2, 2}, {2, 2}, {1, 1}, false},
                                   {1, {5}, {3}, {1}, {1}, true},
                                   {3, {4, 4, 5}, {2, 2, 3}, {2, 2, 1}, {1, 1, 1}, true}};
  for (const Case& c : cases)
    for (bool max : {true, false}) {
      const ConvGeom g = geom_of(c, 3, 3);
      const Shape xs = spatial_shape(g, g.n, "c", g.cin);
      const auto xv = wave(xs.num_elements(), 1.0);
      const auto dims = dims_of(g);
      const Padding pad = c.same ? Padding::same : Padding::valid;
      auto out = run_graph(
          xs, xv, Shape{{"unused", 1}}, {0.0},
          [&](Tensor x, Tensor) {
            return max ? nn::max_pool(x, dims, pad) : nn::avg_pool(x, dims, pad);
          },
          loss_weights);
      const ConvRef ref = pool_reference(g, xv, loss_weights(g.batch * g.points(g.m) * g.cin), max);
      const std::string w = cat(max ? "max " : "avg ", name_of(c));
      std::vector<Dimension> ydims = spatial_shape(g, g.m, "c", g.cin).dims();
      expect_values(out[0], Shape(ydims), ref.y, w + " y");
      expect_values(out[1], xs, ref.dx, w + " d/dx");
    }
}

SpatialDim sd(const std::string& dim, const std::string& tap, std::int64_t stride = 1,
              const std::string& blocks = "") {
  return {dim, tap, stride, 1, blocks, 0};
}

TEST(Conv, ClearErrors) {
  Graph g;
  Tensor x = placeholder(g, "image", {{"b", 2}, {"h", 3}, {"c", 2}});
  Tensor f = placeholder(g, "filter", {{"kh", 5}, {"c", 2}, {"co", 4}});
  const std::vector<SpatialDim> dims{sd("h", "kh")};
  expect_parts(error_of([&] { nn::conv(x, f, dims, "c", "co", Padding::valid); }),
               {"mtk::extract_patches", "'image'", "'h'", "size 5", "3 positions",
                "larger than the padded input"});
  expect_parts(error_of([&] { nn::conv(x, f, {sd("h", "kw")}, "c", "co"); }),
               {"mtk::nn::conv", "'filter'", "'kw'"});
  expect_parts(error_of([&] { nn::conv(x, f, dims, "c", "nope"); }), {"mtk::nn::conv", "'nope'"});
  Tensor xb = placeholder(g, "blocked", {{"hb", 4}, {"h", 3}, {"c", 2}});
  Tensor f3 = placeholder(g, "f3", {{"kh", 3}, {"c", 2}, {"co", 4}});
  expect_parts(error_of([&] { nn::conv(xb, f3, {sd("h", "kh", 2, "hb")}, "c", "co"); }),
               {"mtk::nn::conv", "'h'", "3 positions per block", "stride 2"});
  expect_parts(
      error_of([&] { nn::conv(xb, f3, {sd("h", "kh", 1, "hb")}, "c", "co", Padding::valid); }),
      {"VALID", "'h'", "'hb'"});
  Tensor big = placeholder(
      g, "big", {{"a", 1}, {"b", 1}, {"db", 1}, {"d", 2}, {"hb", 1}, {"h", 2}, {"w", 2}, {"c", 1}});
  Tensor f333 = placeholder(g, "f333", {{"kd", 1}, {"kh", 1}, {"kw", 1}, {"c", 1}, {"co", 1}});
  expect_parts(error_of([&] {
                 nn::conv(big, f333, {sd("d", "kd"), sd("h", "kh"), sd("w", "kw")}, "c", "co");
               }),
               {"mtk::nn::conv", "'big'", "9 dims", "at most 8"});
  Tensor f9 = placeholder(g, "f9", {{"kh", 9}, {"c", 2}, {"co", 4}});
  expect_parts(error_of([&] { nn::conv(xb, f9, {sd("h", "kh", 1, "hb")}, "c", "co"); }),
               {"mtk::halo_exchange", "'blocked'", "wider than its blocks", "3 positions"});
}

}  // namespace
}  // namespace mtk::test
