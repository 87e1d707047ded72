#pragma once
// Reference helpers shared by the kernel tests: random inputs, naive broadcasting offsets, error
// expectations.

#include <mtk/base/error.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/view.hpp>

#include <gtest/gtest.h>

#include "mtk_test_util.hpp"
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mtk::test {

inline std::vector<double> random_values(std::int64_t n, double lo, double hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = dist(gen);
  return v;
}

inline std::vector<double> random_ints(std::int64_t n, int lo, int hi, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = dist(gen);
  return v;
}

/// Offset in a row-major buffer of shape `in` of the element at row-major position k of `out`,
/// matching dims by name (the naive reference of broadcasting).
inline std::int64_t ref_offset(const Shape& out, const Shape& in, std::int64_t k) {
  std::vector<std::int64_t> idx(static_cast<size_t>(out.rank()));
  for (int i = out.rank() - 1; i >= 0; --i) {
    idx[static_cast<size_t>(i)] = k % out[i].size;
    k /= out[i].size;
  }
  std::int64_t off = 0;
  for (int j = 0; j < in.rank(); ++j)
    off = off * in[j].size + idx[static_cast<size_t>(out.index_of(in[j].name))];
  return off;
}

/// Multi-index of row-major position k in `s`.
inline std::vector<std::int64_t> unflatten(const Shape& s, std::int64_t k) {
  std::vector<std::int64_t> idx(static_cast<size_t>(s.rank()));
  for (int i = s.rank() - 1; i >= 0; --i) {
    idx[static_cast<size_t>(i)] = k % s[i].size;
    k /= s[i].size;
  }
  return idx;
}

/// While alive, the kernels take their GPU-shaped paths (kernels::impl::device_paths) on the host
/// too where `on`: those paths are tested on every CPU, not only where a GPU runs the suite.
class DevicePaths {
 public:
  explicit DevicePaths(bool on) : was_(mtk::kernels::impl::forced_device_paths().exchange(on)) {}
  ~DevicePaths() { mtk::kernels::impl::forced_device_paths() = was_; }
  DevicePaths(const DevicePaths&) = delete;
  DevicePaths& operator=(const DevicePaths&) = delete;

 private:
  bool was_;
};

/// Expects `f` to throw mtk::Error whose message contains every string of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no mtk::Error thrown";
  } catch (const mtk::Error& e) {
    const std::string what = e.what();
    for (const auto& p : parts)
      EXPECT_NE(what.find(p), std::string::npos) << what << " lacks " << p;
  }
}

}  // namespace mtk::test

// The names every kernel test file uses (`using namespace kernel_test_names;` in its anonymous
// namespace).
namespace kernel_test_names {
namespace k = mtk::kernels;
using mtk::BinaryFn;
using mtk::CompareFn;
using mtk::Shape;
using mtk::UnaryFn;
using mtk::test::DevicePaths;
using mtk::test::expect_error;
using mtk::test::random_ints;
using mtk::test::random_values;
using mtk::test::ref_offset;
using mtk::test::to_vector;
using mtk::test::to_view;
using mtk::test::unflatten;
using I32 = std::int32_t;
}  // namespace kernel_test_names
