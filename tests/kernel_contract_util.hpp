#pragma once
// Helpers of the kernel tests: host references for einsum and friends, error checks, a Kokkos
// Tools recorder (test_kernels_contract, test_kernels_reduce, test_kernels_indexing).

#include <mtk/base/error.hpp>
#include <mtk/kernels/kernels.hpp>

#include <KokkosKernels_config.h>
#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include "mtk_test_util.hpp"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace mtk::test::contract {

using mtk::Dimension;
using mtk::ReduceFn;
using mtk::Shape;
using mtk::test::DevicePaths;
using mtk::test::to_vector;
using mtk::test::to_view;
namespace k = mtk::kernels;
using Index = std::map<std::string, std::int64_t>;

inline std::vector<double> random_values(std::int64_t n, unsigned seed, double lo = -1.0,
                                         double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v)
    x = static_cast<double>(static_cast<float>(dist(gen)));
  return v;
}

inline std::vector<double> random_ids(std::int64_t n, unsigned seed, int lo, int hi) {
  return mtk::test::random_ints(n, lo, hi, seed);
}

inline std::int64_t offset_of(const Shape& s, const Index& idx) {
  std::int64_t f = 0;
  for (const auto& d : s.dims())
    f = f * d.size + idx.at(d.name);
  return f;
}

// Calls f(index) for every multi-index over `dims` (none when a size is 0).
inline void for_each_index(const std::vector<Dimension>& dims,
                           const std::function<void(const Index&)>& f) {
  for (const auto& d : dims)
    if (d.size == 0)
      return;
  Index idx;
  for (const auto& d : dims)
    idx[d.name] = 0;
  while (true) {
    f(idx);
    int i = static_cast<int>(dims.size()) - 1;
    for (; i >= 0; --i) {
      auto& c = idx[dims[static_cast<size_t>(i)].name];
      if (++c < dims[static_cast<size_t>(i)].size)
        break;
      c = 0;
    }
    if (i < 0)
      return;
  }
}

inline std::vector<Dimension> union_dims(const std::vector<const Shape*>& shapes) {
  std::vector<Dimension> dims;
  std::set<std::string> seen;
  for (const Shape* s : shapes)
    for (const auto& d : s->dims())
      if (seen.insert(d.name).second)
        dims.push_back(d);
  return dims;
}

inline std::vector<double> ref_einsum(const Shape& as, const std::vector<double>& a,
                                      const Shape& bs, const std::vector<double>& b,
                                      const Shape& os) {
  std::vector<double> out(static_cast<size_t>(os.num_elements()), 0.0);
  for_each_index(union_dims({&as, &bs, &os}), [&](const Index& idx) {
    out[static_cast<size_t>(offset_of(os, idx))] +=
        a[static_cast<size_t>(offset_of(as, idx))] * b[static_cast<size_t>(offset_of(bs, idx))];
  });
  return out;
}

// max |x - ref| / max |ref| (absolute when ref is all zeros).
inline double rel_error(const std::vector<double>& x, const std::vector<double>& ref) {
  EXPECT_EQ(x.size(), ref.size());
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < std::min(x.size(), ref.size()); ++i) {
    num = std::max(num, std::abs(x[i] - ref[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return den > 0 ? num / den : num;
}

inline void check_einsum(const Shape& as, const Shape& bs, const Shape& os, unsigned seed = 1) {
  SCOPED_TRACE(as.to_string() + " x " + bs.to_string() + " -> " + os.to_string());
  const auto a = random_values(as.num_elements(), seed);
  const auto b = random_values(bs.num_elements(), seed + 100);
  const auto out = k::einsum(mtk::ExecSpace(), as, to_view<float>(a), bs, to_view<float>(b), os);
  ASSERT_EQ(static_cast<std::int64_t>(out.extent(0)), os.num_elements());
  EXPECT_LE(rel_error(to_vector(out), ref_einsum(as, a, bs, b, os)), 1e-5);
}

template <class F>
inline void expect_error(F&& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected mtk::Error";
  } catch (const mtk::Error& e) {
    const std::string what = e.what();
    for (const auto& frag : fragments)
      EXPECT_NE(what.find(frag), std::string::npos) << "'" << what << "' lacks '" << frag << "'";
  }
}

// Records Kokkos region names and kernel labels while alive.
struct Recorder {
  static std::vector<std::string>& regions() {
    static std::vector<std::string> r;
    return r;
  }
  static std::vector<std::string>& kernels() {
    static std::vector<std::string> r;
    return r;
  }
  Recorder() {
    regions().clear();
    kernels().clear();
    Kokkos::Tools::Experimental::set_push_region_callback(
        [](const char* name) { regions().emplace_back(name); });
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(
        [](const char* name, std::uint32_t, std::uint64_t*) { kernels().emplace_back(name); });
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(
        [](const char* name, std::uint32_t, std::uint64_t*) { kernels().emplace_back(name); });
  }
  ~Recorder() {
    Kokkos::Tools::Experimental::set_push_region_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_for_callback(nullptr);
    Kokkos::Tools::Experimental::set_begin_parallel_reduce_callback(nullptr);
  }
  static bool saw_region(const std::string& s) {
    return std::find(regions().begin(), regions().end(), s) != regions().end();
  }
  static bool all_kernels_start_with(const std::string& prefix) {
    for (const auto& n : kernels())
      if (n.rfind(prefix, 0) != 0 && n.rfind("Kokkos::", 0) != 0)
        return false;
    return true;
  }
};

}  // namespace mtk::test::contract
