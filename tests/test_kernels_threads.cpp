// Kernels on a threaded backend (issue 14 item 3): the tests really run with the threads they
// were given, the kernels whose sums have a fixed order give bitwise the same result on 1 thread
// and on all of them, and the reductions over every element (Kokkos' static partition) repeat
// bitwise on a fixed thread count. On a serial backend there is one thread and these say so.
#include <mtk/kernels/kernels.hpp>

#include <Kokkos_Core.hpp>
#include <gtest/gtest.h>

#include "kernel_test_util.hpp"
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using namespace kernel_test_names;
using mtk::ExecSpace;
using mtk::ReduceFn;

int threads_requested() {
  const char* s = std::getenv("OMP_NUM_THREADS");
  return s ? std::atoi(s) : 0;
}

// Bitwise equality of two float kernel outputs (to_vector widens exactly to double).
void expect_bitwise(const std::vector<double>& a, const std::vector<double>& b,
                    const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    differ += std::memcmp(&x, &y, sizeof x) != 0;
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.size() << " elements differ";
}

// Values of very different magnitudes: any change of summation order changes the rounding.
std::vector<double> spread_values(std::int64_t n, unsigned seed) {
  auto v = random_values(n, -1.0, 1.0, seed);
  auto e = random_ints(n, -20, 20, seed + 1);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(std::ldexp(v[i], static_cast<int>(e[i])));
  return v;
}

// Under ctest, OMP_NUM_THREADS is MTK_TEST_THREADS; a threaded Kokkos must have taken it.
TEST(Threads, KokkosRunsWithTheThreadsOfTheTest) {
  const int conc = ExecSpace().concurrency();
  std::cout << "Kokkos::DefaultExecutionSpace " << ExecSpace::name() << ", concurrency " << conc
            << ", OMP_NUM_THREADS=" << threads_requested() << "\n";
#if defined(KOKKOS_ENABLE_OPENMP)
  if (std::is_same_v<ExecSpace, Kokkos::OpenMP> && threads_requested() > 0) {
    EXPECT_EQ(conc, threads_requested());
  }
#endif
  if (std::string(ExecSpace::name()) == "Serial") {
    EXPECT_EQ(conc, 1);
  }
}

// The results the docs promise on any thread count: scatter_add (fixed-order sums per table
// element), reductions that keep dims (each output summed by one thread), cumsum, softmax over
// strided rows. Compared between an instance with one thread and the default instance.
TEST(Threads, FixedOrderKernelsAreBitwiseTheSameOnOneAndAllThreads) {
#if defined(KOKKOS_ENABLE_OPENMP) && KOKKOS_VERSION >= 40000
  if constexpr (std::is_same_v<ExecSpace, Kokkos::OpenMP>) {
    const ExecSpace all;
    if (all.concurrency() < 2)
      GTEST_SKIP() << "one OpenMP thread: nothing to compare";
    const ExecSpace one(1);
    // concurrency() is static (the default instance's) while Kokkos' deprecated code is on.
    ASSERT_EQ(one.impl_thread_pool_size(), 1);
    const Shape x_shape{{"b", 24}, {"l", 96}, {"d", 40}};
    const auto x = to_view<float>(spread_values(x_shape.num_elements(), 5));
    for (const Shape& out :
         {Shape{{"b", 24}}, Shape{{"d", 40}}, Shape{{"l", 96}}, Shape{{"d", 40}, {"b", 24}}}) {
      const auto a = to_vector(k::reduce<float>(one, ReduceFn::sum, x_shape, x, out));
      const auto b = to_vector(k::reduce<float>(all, ReduceFn::sum, x_shape, x, out));
      expect_bitwise(a, b, "reduce sum to " + out.to_string());
    }
    for (int dim = 0; dim < 3; ++dim) {
      expect_bitwise(to_vector(k::cumsum(one, x_shape, x, dim, false)),
                     to_vector(k::cumsum(all, x_shape, x, dim, false)),
                     "cumsum along " + std::to_string(dim));
    }
    expect_bitwise(to_vector(k::softmax(one, x_shape, x, 1, false)),
                   to_vector(k::softmax(all, x_shape, x, 1, false)), "softmax along l");

    const Shape ids_shape{{"b", 24}, {"l", 96}};
    auto ids = random_ints(ids_shape.num_elements(), 0, 49, 9);
    for (size_t i = 0; i < ids.size(); i += 2)
      ids[i] = static_cast<double>(i % 3);  // a few ids take most positions
    const auto idv = to_view<I32>(ids);
    for (int table_dim = 0; table_dim < 2; ++table_dim) {
      const Shape table =
          table_dim == 0 ? Shape{{"vocab", 50}, {"d", 40}} : Shape{{"d", 40}, {"vocab", 50}};
      expect_bitwise(
          to_vector(k::scatter_add(one, ids_shape, idv, x_shape, x, table, table_dim, 0)),
          to_vector(k::scatter_add(all, ids_shape, idv, x_shape, x, table, table_dim, 0)),
          "scatter_add into " + table.to_string());
    }
    return;
  }
#endif
  GTEST_SKIP() << ExecSpace::name() << " (Kokkos " << KOKKOS_VERSION
               << "): no OpenMP instance of one thread to compare with";
}

// A reduction over every element is a Kokkos parallel_reduce: its partition is fixed for a thread
// count, so repeated runs agree bitwise (no result depends on thread timing).
TEST(Threads, FullReductionsRepeatBitwise) {
  const Shape x_shape{{"b", 64}, {"d", 1000}};
  const auto x = to_view<float>(spread_values(x_shape.num_elements(), 3));
  const auto first = to_vector(k::reduce<float>(ExecSpace(), ReduceFn::sum, x_shape, x, Shape{}));
  const int repeats = ExecSpace().concurrency() > 1 ? 50 : 2;
  for (int r = 0; r < repeats; ++r) {
    const auto again = to_vector(k::reduce<float>(ExecSpace(), ReduceFn::sum, x_shape, x, Shape{}));
    expect_bitwise(again, first, "full sum, run " + std::to_string(r));
  }
}

}  // namespace
