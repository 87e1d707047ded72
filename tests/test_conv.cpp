// Convolutions, transposed convolutions and pooling over 1 to 3 named spatial dims on one
// processor, against direct float64 loops (tests/spatial_reference.hpp): SAME and VALID, strides
// 1 and 2, odd and even filters, dilation; the gradients of input and filter; the errors. The patch
// kernels themselves (kernels/patches.hpp) bit for bit against naive loops.
#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/error.hpp>
#include <mtk/kernels/patches.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/ops.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "error_text.hpp"
#include "mtk_invariance_check.hpp"
#include "rounding_bound.hpp"
#include "spatial_reference.hpp"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
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

// Within float32 rounding of the float64 reference, bounded by each value's sum of |terms|.
void expect_values(const HostTensor& got, const Shape& shape, const std::vector<double>& want,
                   const std::vector<double>& abs, std::int64_t terms, const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  expect_within_rounding(got, want, abs, terms, what);
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
    expect_values(out[0], spatial_shape(g, g.m, "co", g.cout), ref.y, ref.y_abs, ref.y_terms,
                  w + " y");
    expect_values(out[1], xs, ref.dx, ref.dx_abs, ref.dx_terms, w + " d/dx");
    expect_values(out[2], fs, ref.df, ref.df_abs, ref.df_terms, w + " d/dfilter");
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
    expect_values(out[0], ys, as_grad.dx, as_grad.dx_abs, as_grad.dx_terms, name_of(c) + " y");
    expect_values(out[1], ts, as_grad.y, as_grad.y_abs, as_grad.y_terms, name_of(c) + " d/dx");
    expect_values(out[2], fs, as_grad.df, as_grad.df_abs, as_grad.df_terms,
                  name_of(c) + " d/dfilter");
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
      expect_values(out[0], Shape(ydims), ref.y, ref.y_abs, ref.y_terms, w + " y");
      expect_values(out[1], xs, ref.dx, ref.dx_abs, ref.dx_terms, w + " d/dx");
    }
}

// Equal inputs may leave a product rounded differently at different positions (OpenBLAS's
// Haswell/Zen sgemm does, docs/numerics.md), so a max's gradient must not tell a tie from a tie
// that rounding split: every window holding the max up to 2^-13 passes dy to each such tap, as an
// exact tie does, whichever of them rounding made the larger; other taps get nothing.
TEST(Pool, MaxGradientTiesUpToRounding) {
  const Shape xs{{"b", 1}, {"h", 2}, {"w", 4}, {"c", 1}};
  const float v = 0.4375f, up = std::nextafter(v, 1.0f), down = std::nextafter(v, 0.0f);
  // Windows (2x2, stride 2): {v, v, v, v} exact; {v, up, down, 0.1} split by rounding.
  const std::vector<double> xv = {v, v, v, up, v, v, down, 0.1};
  const std::vector<SpatialDim> dims{{"h", "ph", 2, 1, "", 2}, {"w", "pw", 2, 1, "", 2}};
  Graph g;
  Tensor x = placeholder(g, "x", xs);
  Tensor y = nn::max_pool(x, dims, Padding::valid);
  auto grads = gradients(reduce_sum(y), {x});
  auto p = lower(g, single_processor_mesh(), LayoutRules());
  auto out = p->run({{x.id(), floats_of(xs, xv)}}, {grads[0]});
  const std::vector<double> tied = {1, 1, 1, 1, 1, 1, 1, 0};
  EXPECT_EQ(out[0].values<float>(), std::vector<float>(tied.begin(), tied.end())) << "split ties";
  // A real difference (1e-3, far above rounding) is no tie.
  const std::vector<double> apart = {v, v, v, v * 1.001, v, v, v, 0.1};
  out = p->run({{x.id(), floats_of(xs, apart)}}, {grads[0]});
  const std::vector<double> untied = {1, 1, 0, 1, 1, 1, 0, 0};
  EXPECT_EQ(out[0].values<float>(), std::vector<float>(untied.begin(), untied.end())) << "no tie";
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

// ------------------------------------------------------------------ the patch kernels themselves

using kernels::PatchGeometry;

// A patch geometry: the input's shape (its spatial dims among batch, group and channel dims) and
// 1 to 3 geometries, in any order of dims.
struct PatchCase {
  Shape shape;
  std::vector<PatchGeometry> axes;
};

std::string name_of(const PatchCase& c) {
  std::string t = c.shape.to_string();
  for (const auto& g : c.axes)
    t += cat(" [dim ", g.dim, " taps ", g.taps, " stride ", g.stride, " dilation ", g.dilation,
             " pad ", g.pad_before, " out ", g.out, "]");
  return t;
}

// layout 0: channels last; 1: a spatial dim last; 2: any order.
PatchCase random_patch_case(std::mt19937& gen, int naxes, std::int64_t channels, int layout,
                            std::int64_t stride, std::int64_t dilation, std::int64_t max_taps = 4) {
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  std::vector<Dimension> dims{{"b", pick(1, 2)}};
  if (pick(0, 1))
    dims.push_back({"g", pick(1, 2)});
  for (int a = 0; a < naxes; ++a)
    dims.push_back({cat("s", a), pick(1, naxes == 3 ? 5 : 7)});
  std::shuffle(dims.begin(), dims.end(), gen);
  if (layout == 0)
    dims.push_back({"c", channels});
  else
    dims.insert(dims.begin() + (layout == 1 ? 0 : pick(0, static_cast<std::int64_t>(dims.size()))),
                {"c", channels});
  if (layout == 1)  // a spatial dim last
    std::iter_swap(
        std::find_if(dims.begin(), dims.end(), [](const Dimension& d) { return d.name[0] == 's'; }),
        dims.end() - 1);
  PatchCase c{Shape(dims), {}};
  for (int a = 0; a < naxes; ++a) {
    PatchGeometry g;
    g.dim = c.shape.index_of(cat("s", a));
    g.taps = pick(max_taps > 4 ? 4 : 1, max_taps);
    g.stride = stride;
    g.dilation = dilation;
    g.pad_before = pick(0, 2);
    const std::int64_t n = c.shape[g.dim].size, span = (g.taps - 1) * dilation + 1;
    const std::int64_t room = n + g.pad_before + pick(0, 2) - span;
    g.out = std::max<std::int64_t>(room < 0 ? 0 : room / stride + 1, 0) + (pick(0, 5) == 0);
    c.axes.push_back(g);
  }
  std::shuffle(c.axes.begin(), c.axes.end(), gen);
  return c;
}

// Where the taps go among the patches' dims (ops/patches.hpp): before the last dim where it is
// not spatial (the channels), else after it.
size_t tap_position(const PatchCase& c) {
  const int last = c.shape.rank() - 1;
  const bool spatial = std::any_of(c.axes.begin(), c.axes.end(),
                                   [&](const PatchGeometry& g) { return g.dim == last; });
  return static_cast<size_t>(spatial ? last + 1 : last);
}

// The patches' dims: the input's with the spatial ones resized, the taps at tap_position().
std::vector<std::int64_t> patch_extents(const PatchCase& c) {
  std::vector<std::int64_t> e, taps;
  for (int d = 0; d < c.shape.rank(); ++d)
    e.push_back(c.shape[d].size);
  for (const auto& g : c.axes) {
    e[static_cast<size_t>(g.dim)] = g.out;
    taps.push_back(g.taps);
  }
  e.insert(e.begin() + static_cast<std::ptrdiff_t>(tap_position(c)), taps.begin(), taps.end());
  return e;
}

std::vector<std::int64_t> unflatten(const std::vector<std::int64_t>& e, std::int64_t f) {
  std::vector<std::int64_t> idx(e.size());
  for (size_t d = e.size(); d-- > 0;) {
    idx[d] = f % e[d];
    f /= e[d];
  }
  return idx;
}

std::int64_t flatten(const std::vector<std::int64_t>& e, const std::vector<std::int64_t>& idx) {
  std::int64_t f = 0;
  for (size_t d = 0; d < e.size(); ++d)
    f = f * e[d] + idx[d];
  return f;
}

// A patch entry's multi-index (patch_extents' order) from its position's (the input's dims) and
// its taps' indices.
std::vector<std::int64_t> patch_index(const PatchCase& c, const std::vector<std::int64_t>& position,
                                      const std::vector<std::int64_t>& taps) {
  std::vector<std::int64_t> idx = position;
  idx.insert(idx.begin() + static_cast<std::ptrdiff_t>(tap_position(c)), taps.begin(), taps.end());
  return idx;
}

// Naive extract: every patch entry's source computed directly from its multi-index.
template <class T>
std::vector<T> reference_extract(const PatchCase& c, const std::vector<T>& x, T pad_value) {
  const std::vector<std::int64_t> e = patch_extents(c);
  std::int64_t total = 1;
  for (std::int64_t v : e)
    total *= v;
  std::vector<T> y(static_cast<size_t>(total));
  const size_t rank = static_cast<size_t>(c.shape.rank()), tp = tap_position(c),
               naxes = c.axes.size();
  for (std::int64_t f = 0; f < total; ++f) {
    const std::vector<std::int64_t> pidx = unflatten(e, f);
    std::vector<std::int64_t> idx(rank);  // the input's dims
    for (size_t d = 0; d < rank; ++d)
      idx[d] = pidx[d < tp ? d : d + naxes];
    bool inside = true;
    for (size_t a = 0; a < naxes; ++a) {
      const PatchGeometry& g = c.axes[a];
      const std::int64_t i =
          idx[static_cast<size_t>(g.dim)] * g.stride + pidx[tp + a] * g.dilation - g.pad_before;
      inside = inside && i >= 0 && i < c.shape[g.dim].size;
      idx[static_cast<size_t>(g.dim)] = i;
    }
    std::int64_t src = 0;
    for (size_t d = 0; d < rank; ++d)
      src = src * c.shape[static_cast<int>(d)].size + idx[d];
    y[static_cast<size_t>(f)] = inside ? x[static_cast<size_t>(src)] : pad_value;
  }
  return y;
}

// Naive fold: every input element sums, from T(0) and in row-major tap order, the patch entries
// that read it.
template <class T>
std::vector<T> reference_fold(const PatchCase& c, const std::vector<T>& p) {
  const std::vector<std::int64_t> e = patch_extents(c);
  const size_t rank = static_cast<size_t>(c.shape.rank());
  std::vector<std::int64_t> in_e(rank), taps;
  for (size_t d = 0; d < rank; ++d)
    in_e[d] = c.shape[static_cast<int>(d)].size;
  std::int64_t all_taps = 1;
  for (const auto& g : c.axes) {
    taps.push_back(g.taps);
    all_taps *= g.taps;
  }
  std::vector<T> y(static_cast<size_t>(c.shape.num_elements()));
  for (std::int64_t f = 0; f < c.shape.num_elements(); ++f) {
    const std::vector<std::int64_t> i = unflatten(in_e, f);
    T sum = T(0);
    for (std::int64_t t = 0; t < all_taps; ++t) {
      const std::vector<std::int64_t> ti = unflatten(taps, t);
      std::vector<std::int64_t> o = i;
      bool lands = true;
      for (size_t a = 0; a < c.axes.size(); ++a) {
        const PatchGeometry& g = c.axes[a];
        const std::int64_t num = i[static_cast<size_t>(g.dim)] + g.pad_before - ti[a] * g.dilation;
        lands = lands && num >= 0 && num % g.stride == 0 && num / g.stride < g.out;
        o[static_cast<size_t>(g.dim)] = num / g.stride;
      }
      if (lands)
        sum += p[static_cast<size_t>(flatten(e, patch_index(c, o, ti)))];
    }
    y[static_cast<size_t>(f)] = sum;
  }
  return y;
}

template <class T>
kernels::View<T> device_copy(const std::vector<T>& v) {
  kernels::View<T> d("patch test", v.size());
  auto h = Kokkos::create_mirror_view(d);
  for (size_t k = 0; k < v.size(); ++k)
    h(k) = v[k];
  Kokkos::deep_copy(d, h);
  return d;
}

// Bitwise equality, element by element.
template <class T>
void expect_bitwise(const kernels::View<T>& got, const std::vector<T>& want,
                    const std::string& what) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), got);
  ASSERT_EQ(h.extent(0), want.size()) << what;
  for (size_t k = 0; k < want.size(); ++k)
    ASSERT_EQ(std::memcmp(&h(k), &want[k], sizeof(T)), 0)
        << what << " at " << k << ": " << h(k) << " against " << want[k];
}

template <class T>
void check_patch_kernels(std::mt19937& gen, const PatchCase& c) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> x(static_cast<size_t>(c.shape.num_elements()));
  for (auto& v : x)
    v = static_cast<T>(dist(gen));
  const T pad = static_cast<T>(-0.75);
  const std::string what = name_of(c);
  const auto patches = reference_extract(c, x, pad);
  expect_bitwise(kernels::extract_patches(ExecSpace(), c.shape, device_copy(x), c.axes, pad),
                 patches, "extract " + what);
  std::vector<T> p(patches.size());  // fractions: their sums depend on the order of the adds
  for (auto& v : p)
    v = static_cast<T>(dist(gen));
  expect_bitwise(kernels::fold_patches(ExecSpace(), c.shape, device_copy(p), c.axes),
                 reference_fold(c, p), "fold " + what);
}

TEST(PatchKernels, BitwiseEqualTheNaiveLoops) {
  std::mt19937 gen(2024);
  int cases = 0;
  for (int naxes = 1; naxes <= 3; ++naxes)
    for (std::int64_t channels : {1, 3, 4, 8, 16, 17, 32})  // 4, 8, 16, 32: unrolled copies
      for (int layout = 0; layout < 3; ++layout)
        for (std::int64_t stride : {1, 2})
          for (std::int64_t dilation : {1, 2})
            for (int rep = 0; rep < 4; ++rep, ++cases) {
              const PatchCase c = random_patch_case(gen, naxes, channels, layout, stride, dilation);
              if (cases % 2)
                check_patch_kernels<float>(gen, c);
              else
                check_patch_kernels<double>(gen, c);
              if (HasFatalFailure())
                return;
            }
}

// More taps than a block sweep holds (fold_patches then gathers on the host too).
TEST(PatchKernels, ManyTapsEqualTheNaiveLoops) {
  std::mt19937 gen(99);
  int many = 0;  // cases with more than 64 taps and some output
  for (std::int64_t channels : {1, 16, 17})
    for (int layout = 0; layout < 3; ++layout)
      for (std::int64_t stride : {1, 2})
        for (int rep = 0; rep < 2; ++rep) {
          const PatchCase c = random_patch_case(gen, 3, channels, layout, stride, 1, 6);
          std::int64_t taps = 1, positions = 1;
          for (const auto& g : c.axes) {
            taps *= g.taps;
            positions *= g.out;
          }
          many += taps > 64 && positions > 0;
          check_patch_kernels<float>(gen, c);
          if (HasFatalFailure())
            return;
        }
  EXPECT_GE(many, 12);
}

// The benchmark's shapes ([db, d, hb, h, wb, w, c], 3x3x3 taps, halo'd or padded) against the
// naive loops.
TEST(PatchKernels, BenchmarkShapes) {
  std::mt19937 gen(7);
  for (std::int64_t n : {16, 18}) {
    PatchCase c{Shape{{"db", 1}, {"d", n}, {"hb", 1}, {"h", n}, {"wb", 1}, {"w", n}, {"c", 16}},
                {}};
    for (int a = 0; a < 3; ++a)
      c.axes.push_back({2 * a + 1, 3, 1, 1, n == 16 ? 1 : 0, 16});
    check_patch_kernels<float>(gen, c);
  }
}

}  // namespace
}  // namespace mtk::test
