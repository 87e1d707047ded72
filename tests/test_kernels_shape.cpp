// Tests of the shape kernels (kernels/shape.hpp) against naive host loops.

#include <mtk/base/error.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/halo.hpp>
#include <mtk/kernels/impl/index.hpp>
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

// ------------------------------------------------------------------ layout

template <class T>
void check_transpose() {
  Shape in{{"a", 2}, {"b", 3}, {"c", 4}, {"d", 5}};
  auto x = random_ints(in.num_elements(), -100, 100, 51);
  const std::vector<std::vector<int>> perms = {
      {0, 1, 2, 3}, {3, 2, 1, 0}, {1, 0, 2, 3}, {0, 2, 3, 1}, {2, 0, 3, 1}};
  for (const auto& p : perms) {
    std::vector<mtk::Dimension> dims;
    for (int i : p)
      dims.push_back(in[i]);
    Shape out(dims);
    SCOPED_TRACE(out.to_string());
    auto y = to_vector(k::transpose<T>(mtk::ExecSpace(), in, to_view<T>(x), out));
    ASSERT_EQ(y.size(), x.size());
    for (std::int64_t e = 0; e < out.num_elements(); ++e)
      ASSERT_EQ(y[static_cast<size_t>(e)], x[static_cast<size_t>(ref_offset(out, in, e))]);
  }
}

TEST(KernelsLayout, TransposeFloat) {
  check_transpose<float>();
}
TEST(KernelsLayout, TransposeInt32) {
  check_transpose<I32>();
}

TEST(KernelsLayout, TransposeErrors) {
  Shape in{{"a", 2}, {"b", 3}};
  auto x = to_view<float>(std::vector<double>(6, 1.0));
  expect_error(
      [&] {
        k::transpose<float>(mtk::ExecSpace(), in, x, Shape{{"b", 3}, {"a", 2}, {"c", 1}});
      },
      {"mtk::kernels::transpose", "[a=2, b=3]", "[b=3, a=2, c=1]"});
  expect_error(
      [&] {
        k::transpose<float>(mtk::ExecSpace(), in, x, Shape{{"b", 2}, {"a", 2}});
      },
      {"mtk::kernels::transpose", "[a=2, b=3]", "[b=2, a=2]"});
  expect_error(
      [&] {
        k::transpose<float>(mtk::ExecSpace(), in, x, Shape{{"b", 3}, {"c", 2}});
      },
      {"mtk::kernels::transpose", "[a=2, b=3]"});
}

TEST(KernelsLayout, Broadcast) {
  struct Case {
    Shape in, out;
  };
  const std::vector<Case> cases = {
      {{{"d", 5}}, {{"b", 3}, {"l", 4}, {"d", 5}}},
      {{{"b", 3}}, {{"b", 3}, {"l", 4}}},
      {{{"l", 4}, {"b", 3}}, {{"b", 3}, {"x", 2}, {"l", 4}}},
      {{{"b", 3}, {"l", 4}}, {{"b", 3}, {"l", 4}}},
      {{}, {{"b", 3}, {"l", 4}}},
      {{{"b", 3}, {"l", 4}}, {{"b", 3}, {"l", 4}, {"t", 5}, {"x", 2}}},  // leading dims: repeats
  };
  unsigned seed = 61;
  for (const bool device : {false, true})
    for (const auto& c : cases) {
      SCOPED_TRACE(c.in.to_string() + " -> " + c.out.to_string() + (device ? " (GPU form)" : ""));
      const DevicePaths paths(device);
      auto x = random_ints(c.in.num_elements(), -100, 100, seed++);
      auto yf = to_vector(k::broadcast<float>(mtk::ExecSpace(), c.in, to_view<float>(x), c.out));
      auto yi = to_vector(k::broadcast<I32>(mtk::ExecSpace(), c.in, to_view<I32>(x), c.out));
      ASSERT_EQ(static_cast<std::int64_t>(yf.size()), c.out.num_elements());
      for (std::int64_t e = 0; e < c.out.num_elements(); ++e) {
        ASSERT_EQ(yf[static_cast<size_t>(e)], x[static_cast<size_t>(ref_offset(c.out, c.in, e))]);
        ASSERT_EQ(yi[static_cast<size_t>(e)], x[static_cast<size_t>(ref_offset(c.out, c.in, e))]);
      }
    }
  expect_error(
      [] {
        k::broadcast<float>(mtk::ExecSpace(), Shape{{"a", 2}}, to_view<float>({1, 2}),
                            Shape{{"b", 2}});
      },
      {"mtk::kernels::broadcast", "[a=2]", "[b=2]"});
}

/// Reference: x of shape `in`, element at multi-index idx of the result comes from fn(idx).
template <class T>
void check_slice() {
  Shape in{{"a", 3}, {"b", 7}, {"c", 2}};
  auto x = random_ints(in.num_elements(), -100, 100, 71);
  for (int dim = 0; dim < 3; ++dim) {
    const std::int64_t n = in[dim].size;
    for (std::int64_t begin = 0; begin < n; ++begin) {
      for (std::int64_t size = 0; begin + size <= n; ++size) {
        std::vector<mtk::Dimension> dims = in.dims();
        dims[static_cast<size_t>(dim)].size = size;
        Shape out(dims);
        auto y = to_vector(k::slice<T>(mtk::ExecSpace(), in, to_view<T>(x), dim, begin, size));
        ASSERT_EQ(static_cast<std::int64_t>(y.size()), out.num_elements());
        for (std::int64_t e = 0; e < out.num_elements(); ++e) {
          auto idx = unflatten(out, e);
          idx[static_cast<size_t>(dim)] += begin;
          ASSERT_EQ(y[static_cast<size_t>(e)],
                    x[static_cast<size_t>(mtk::test::flat_index(in, idx))]);
        }
      }
    }
  }
  expect_error([&] { k::slice<T>(mtk::ExecSpace(), in, to_view<T>(x), 1, 5, 3); },
               {"mtk::kernels::slice", "'b'", "[a=3, b=7, c=2]"});
  expect_error([&] { k::slice<T>(mtk::ExecSpace(), in, to_view<T>(x), 3, 0, 1); },
               {"mtk::kernels::slice", "[a=3, b=7, c=2]"});
}

TEST(KernelsLayout, SliceFloat) {
  check_slice<float>();
}
TEST(KernelsLayout, SliceInt32) {
  check_slice<I32>();
}

template <class T>
void check_concat() {
  for (int dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE(dim);
    const std::vector<std::int64_t> sizes = {2, 0, 3, 1};
    std::vector<Shape> shapes;
    std::vector<k::View<T>> views;
    std::vector<std::vector<double>> values;
    std::int64_t total = 0;
    for (size_t p = 0; p < sizes.size(); ++p) {
      std::vector<mtk::Dimension> dims = {{"a", 2}, {"b", 3}, {"c", 4}};
      dims[static_cast<size_t>(dim)].size = sizes[p];
      shapes.emplace_back(dims);
      values.push_back(
          random_ints(shapes.back().num_elements(), -100, 100, static_cast<unsigned>(80 + p)));
      views.push_back(to_view<T>(values.back()));
      total += sizes[p];
    }
    std::vector<mtk::Dimension> dims = {{"a", 2}, {"b", 3}, {"c", 4}};
    dims[static_cast<size_t>(dim)].size = total;
    Shape out(dims);
    auto y = to_vector(k::concat<T>(mtk::ExecSpace(), shapes, views, dim));
    ASSERT_EQ(static_cast<std::int64_t>(y.size()), out.num_elements());
    for (std::int64_t e = 0; e < out.num_elements(); ++e) {
      auto idx = unflatten(out, e);
      size_t p = 0;
      while (idx[static_cast<size_t>(dim)] >= sizes[p])
        idx[static_cast<size_t>(dim)] -= sizes[p++];
      ASSERT_EQ(y[static_cast<size_t>(e)],
                values[p][static_cast<size_t>(mtk::test::flat_index(shapes[p], idx))]);
    }
  }
  std::vector<Shape> bad = {Shape{{"a", 2}, {"b", 3}}, Shape{{"a", 3}, {"b", 3}}};
  std::vector<k::View<T>> bv = {to_view<T>(std::vector<double>(6)),
                                to_view<T>(std::vector<double>(9))};
  expect_error([&] { k::concat<T>(mtk::ExecSpace(), bad, bv, 1); },
               {"mtk::kernels::concat", "[a=2, b=3]", "[a=3, b=3]"});
  EXPECT_NO_THROW(k::concat<T>(mtk::ExecSpace(), bad, bv, 0));
}

TEST(KernelsLayout, ConcatFloat) {
  check_concat<float>();
}
TEST(KernelsLayout, ConcatInt32) {
  check_concat<I32>();
}

template <class T>
void check_pad() {
  Shape in{{"a", 2}, {"b", 3}, {"c", 4}};
  auto x = random_ints(in.num_elements(), -100, 100, 91);
  for (int dim = 0; dim < 3; ++dim) {
    for (auto [before, after] : std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {0, 2}, {3, 1}}) {
      std::vector<mtk::Dimension> dims = in.dims();
      dims[static_cast<size_t>(dim)].size += before + after;
      Shape out(dims);
      auto y = to_vector(k::pad<T>(mtk::ExecSpace(), in, to_view<T>(x), dim, before, after, T(7)));
      ASSERT_EQ(static_cast<std::int64_t>(y.size()), out.num_elements());
      for (std::int64_t e = 0; e < out.num_elements(); ++e) {
        auto idx = unflatten(out, e);
        auto& j = idx[static_cast<size_t>(dim)];
        j -= before;
        const double r = (j >= 0 && j < in[dim].size)
                             ? x[static_cast<size_t>(mtk::test::flat_index(in, idx))]
                             : 7.0;
        ASSERT_EQ(y[static_cast<size_t>(e)], r);
      }
    }
  }
  expect_error([&] { k::pad<T>(mtk::ExecSpace(), in, to_view<T>(x), 1, -1, 0, T(0)); },
               {"mtk::kernels::pad", "[a=2, b=3, c=4]"});
}

TEST(KernelsLayout, PadFloat) {
  check_pad<float>();
}
TEST(KernelsLayout, PadInt32) {
  check_pad<I32>();
}

template <class T>
void check_shift() {
  Shape in{{"a", 2}, {"b", 5}, {"c", 3}};
  auto x = random_ints(in.num_elements(), 1, 100, 95);  // nonzero: zero fill is visible
  for (int dim = 0; dim < 3; ++dim) {
    const std::int64_t n = in[dim].size;
    for (std::int64_t offset = -7; offset <= 7; ++offset) {
      for (bool wrap : {false, true}) {
        SCOPED_TRACE(mtk::cat("dim ", dim, " offset ", offset, " wrap ", wrap));
        auto y = to_vector(k::shift<T>(mtk::ExecSpace(), in, to_view<T>(x), dim, offset, wrap));
        ASSERT_EQ(y.size(), x.size());
        for (std::int64_t e = 0; e < in.num_elements(); ++e) {
          auto idx = unflatten(in, e);
          auto& j = idx[static_cast<size_t>(dim)];
          j -= offset;
          if (wrap)
            j = ((j % n) + n) % n;
          const double r =
              (j >= 0 && j < n) ? x[static_cast<size_t>(mtk::test::flat_index(in, idx))] : 0.0;
          ASSERT_EQ(y[static_cast<size_t>(e)], r);
        }
      }
    }
  }
  // Spelled out: out[i] = x[i - 1].
  Shape s{{"t", 4}};
  EXPECT_EQ(to_vector(k::shift<T>(mtk::ExecSpace(), s, to_view<T>({1, 2, 3, 4}), 0, 1, false)),
            (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(to_vector(k::shift<T>(mtk::ExecSpace(), s, to_view<T>({1, 2, 3, 4}), 0, 1, true)),
            (std::vector<double>{4, 1, 2, 3}));
  EXPECT_EQ(to_vector(k::shift<T>(mtk::ExecSpace(), s, to_view<T>({1, 2, 3, 4}), 0, -1, false)),
            (std::vector<double>{2, 3, 4, 0}));
}

TEST(KernelsLayout, ShiftFloat) {
  check_shift<float>();
}
TEST(KernelsLayout, ShiftInt32) {
  check_shift<I32>();
}

// Index maps and the per-element kernels divide in 32 bits where the index and the divisor fit:
// the same offsets as 64-bit arithmetic below, at and above 2^32 elements and with extents beyond
// 2^32 (no memory is touched: the maps are arithmetic only).
TEST(KernelsLayout, IndexArithmeticIn32BitsEqualsThe64BitOffsets) {
  const std::int64_t big = std::int64_t(1) << 33;
  std::vector<mtk::kernels::IndexMap> maps(3);
  maps[0].rank = 3;  // [7][65536][12345], strides of a permuted buffer
  const std::int64_t e0[] = {7, 65536, 12345}, s0[] = {12345, 7 * 12345, 1};
  maps[1].rank = 2;  // a dim beyond 2^32
  const std::int64_t e1[] = {3, big}, s1[] = {1, 3};
  maps[2].rank = 4;  // with a broadcast dim
  const std::int64_t e2[] = {5, 9, 1 << 20, 11}, s2[] = {11, 0, 55, 1};
  const std::int64_t* ext[] = {e0, e1, e2};
  const std::int64_t* str[] = {s0, s1, s2};
  for (size_t m = 0; m < maps.size(); ++m)
    for (int i = 0; i < maps[m].rank; ++i) {
      maps[m].extent[i] = ext[m][i];
      maps[m].stride[i] = str[m][i];
    }
  const auto reference = [](const mtk::kernels::IndexMap& map, std::int64_t k) {
    std::int64_t off = 0;
    for (int i = map.rank - 1; i >= 0; --i) {
      off += (k % map.extent[i]) * map.stride[i];
      k /= map.extent[i];
    }
    return off;
  };
  const std::int64_t edge = 0xffffffffLL;
  for (const auto& map : maps) {
    std::int64_t total = 1;
    for (int i = 0; i < map.rank; ++i)
      total *= map.extent[i];
    for (std::int64_t k :
         {std::int64_t(0), std::int64_t(1), std::int64_t(12344), std::int64_t(12345), edge - 1,
          edge, edge + 1, edge + 12345, total - 1}) {
      if (k >= total)
        continue;
      EXPECT_EQ(map.offset(k), reference(map, k)) << "k = " << k;
    }
  }
  for (std::int64_t a : {std::int64_t(0), std::int64_t(7), edge, edge + 1, big + 5})
    for (std::int64_t b : {std::int64_t(1), std::int64_t(3), std::int64_t(65536), edge, edge + 1}) {
      EXPECT_EQ(mtk::kernels::fast_div(a, b), a / b) << a << " / " << b;
      EXPECT_EQ(mtk::kernels::fast_mod(a, b), a % b) << a << " % " << b;
    }
}

// ------------------------------------------------------------------ halo

// The halo kernels' host forms (a line at a time) against their GPU forms (an element per
// thread), bit for bit, with the blocks dim before and after the block dim, halos on either side,
// one block and several, an 8-wide and a 3-wide line, blocks narrower than both halos.
TEST(KernelsLayout, HaloLinesEqualTheElementForms) {
  const mtk::ExecSpace space;
  auto values = [](std::int64_t n, double phase) {
    std::vector<double> v(static_cast<size_t>(n));
    for (size_t e = 0; e < v.size(); ++e)
      v[e] = std::sin(0.71 * static_cast<double>(e) + phase) * 1.37;
    return v;
  };
  for (const bool blocks_first : {true, false})
    for (const std::int64_t nb : {1, 3})
      for (const std::int64_t inner : {3, 8})
        for (const std::int64_t n : {2, 4})
          for (const auto& [left, right] :
               std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 1}, {2, 0}, {0, 2}, {2, 1}}) {
            auto shape = [&](std::int64_t width) {
              return blocks_first
                         ? Shape{{"o", 2}, {"nb", nb}, {"m", 2}, {"j", width}, {"i", inner}}
                         : Shape{{"o", 2}, {"j", width}, {"m", 2}, {"nb", nb}, {"i", inner}};
            };
            const int bd = blocks_first ? 1 : 3, jd = blocks_first ? 3 : 1;
            const Shape s = shape(n), wide = shape(n + left + right);
            const std::int64_t strip = 2 * 2 * inner;
            const auto x = to_view<float>(values(s.num_elements(), 0.3));
            const auto dy = to_view<float>(values(wide.num_elements(), 1.1));
            const auto from_left = to_view<float>(values(strip * std::max(left, right), 2.9));
            const auto from_right = to_view<float>(values(strip * std::max(left, right), 4.2));
            auto sub = [](const k::View<float>& v, std::int64_t count) {
              return k::View<float>(Kokkos::subview(v, std::make_pair(std::int64_t(0), count)));
            };
            SCOPED_TRACE(wide.to_string() + " halo " + std::to_string(left) + "," +
                         std::to_string(right));
            std::vector<std::vector<double>> forms[2];
            for (const bool device : {false, true}) {
              const DevicePaths paths(device);
              auto& got = forms[device ? 1 : 0];
              got.push_back(
                  to_vector(k::halo_assemble(space, s, x, bd, jd, sub(from_left, strip * left),
                                             sub(from_right, strip * right), left, right)));
              const auto folded =
                  k::halo_fold(space, wide, dy, bd, jd, sub(from_left, strip * right),
                               sub(from_right, strip * left), left, right);
              got.push_back(to_vector(folded));
              k::halo_fold_edges(space, wide, dy, bd, jd, sub(from_right, strip * right),
                                 sub(from_left, strip * left), left, right, folded);
              got.push_back(to_vector(folded));
              const auto packed = to_view<float>(std::vector<double>(static_cast<size_t>(strip)));
              k::halo_strip_into(space, s, x, bd, jd, nb - 1, n - 1, 1, packed);
              got.push_back(to_vector(packed));
              const auto placed = to_view<float>(to_vector(dy));
              k::halo_place(space, wide, placed, bd, jd, sub(from_left, strip * left),
                            sub(from_right, strip * right), left, right);
              got.push_back(to_vector(placed));
            }
            for (size_t f = 0; f < forms[0].size(); ++f)
              ASSERT_EQ(forms[0][f], forms[1][f]) << "kernel " << f;
          }
}

// The GPU's forms (kernels::impl::device_paths: a thread per element) forced on the host.
TEST(KernelsLayout, DevicePathsTransposeSliceConcatPadShift) {
  const DevicePaths device(true);
  check_transpose<float>();
  check_transpose<I32>();
  check_slice<float>();
  check_concat<I32>();
  check_pad<float>();
  check_shift<float>();
}

}  // namespace
