// mtk::kernels softmax / log-softmax and their gradient along one dim (reductions: reduce.cpp).
// See reduce.hpp for the contracts.
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/impl/fast_exp.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/shape_checks.hpp>
#include <mtk/kernels/reduce.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace mtk::kernels {
namespace detail::softmax_impl {

using impl::alloc;
using impl::check_dim;
using impl::check_size;
using impl::host_exec;

// ---------------------------------------------------------------- row-wise kernels
//
// softmax, log-softmax and their gradients run one skeleton (for_each_row): a body written once
// against a row's three primitives (max, sum, for_each over the row's elements, each given its
// element index) and three ways of running a row:
//   HostRow     host, contiguous rows: plain loops the compiler vectorises (an integer max,
//               lanes of independent sums), each row swept while it sits in cache
//   TeamRow     contiguous rows elsewhere: one team per row, team-parallel reductions
//   StridedRow  rows `inner` apart (a dim other than the last): one thread per row, serial loops

struct HostRow {
  std::int64_t base, n;
  template <class V>
  KOKKOS_INLINE_FUNCTION float max(const V& x) const {
    std::int32_t km = impl::float_key(x(base));
    for (std::int64_t i = 1; i < n; ++i) {
      const std::int32_t k = impl::float_key(x(base + i));
      km = k > km ? k : km;
    }
    return impl::key_float(km);
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION float sum(const F& f) const {
    constexpr int L = 8;
    float acc[L] = {};
    std::int64_t i = 0;
    for (; i + L <= n; i += L)
      for (int l = 0; l < L; ++l)
        acc[l] += f(base + i + l);
    for (; i < n; ++i)
      acc[0] += f(base + i);
    float s = 0.f;
    for (int l = 0; l < L; ++l)
      s += acc[l];
    return s;
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_each(const F& f) const {
    for (std::int64_t j = 0; j < n; ++j)
      f(base + j);
  }
};

using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;

struct TeamRow {
  const TeamPolicy::member_type& t;
  std::int64_t base, n;
  template <class V>
  KOKKOS_INLINE_FUNCTION float max(const V& x) const {
    float m = 0.f;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(t, n),
        [&](std::int64_t i, float& lm) {
          if (x(base + i) > lm)
            lm = x(base + i);
        },
        Kokkos::Max<float>(m));
    return m;
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION float sum(const F& f) const {
    float s = 0.f;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(t, n), [&](std::int64_t i, float& ls) { ls += f(base + i); }, s);
    return s;
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_each(const F& f) const {
    Kokkos::parallel_for(Kokkos::TeamThreadRange(t, n), [&](std::int64_t i) { f(base + i); });
  }
};

struct StridedRow {
  std::int64_t base, n, inner;
  template <class V>
  KOKKOS_INLINE_FUNCTION float max(const V& x) const {
    float m = x(base);
    for (std::int64_t i = 1; i < n; ++i)
      if (x(base + i * inner) > m)
        m = x(base + i * inner);
    return m;
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION float sum(const F& f) const {
    float s = 0.f;
    for (std::int64_t i = 0; i < n; ++i)
      s += f(base + i * inner);
    return s;
  }
  template <class F>
  KOKKOS_INLINE_FUNCTION void for_each(const F& f) const {
    for (std::int64_t i = 0; i < n; ++i)
      f(base + i * inner);
  }
};

/// Whether the rows of `shape` along `dim` are contiguous and on the host (HostRow's case).
bool contiguous_host_rows(const Shape& shape, int dim) {
  return Around(shape, dim).inner == 1 && host_exec;
}

/// Runs `body(row)` for every row of `shape` along `dim` (a non-empty shape): HostRow where
/// `host_rows` and contiguous_host_rows(), else TeamRow (contiguous rows) or StridedRow.
template <class Body>
void for_each_row(const ExecSpace& space, const char* where, const char* label, const Shape& shape,
                  int dim, const Body& body, bool host_rows) {
  const Around a(shape, dim);
  const std::int64_t n = a.n, inner = a.inner, rows = a.outer * a.inner;
  if (host_rows && contiguous_host_rows(shape, dim)) {
    Kokkos::parallel_for(
        label, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t r) {
          body(HostRow{r * n, n});
        });
    return;
  }
  if (inner == 1) {  // contiguous rows: one team per row
    if (rows > std::numeric_limits<int>::max())
      fail(where, cat("too many rows in ", shape.to_string()));
    Kokkos::parallel_for(
        label, TeamPolicy(space, static_cast<int>(rows), Kokkos::AUTO),
        KOKKOS_LAMBDA(const TeamPolicy::member_type& t) {
          body(TeamRow{t, static_cast<std::int64_t>(t.league_rank()) * n, n});
        });
    return;
  }
  Kokkos::parallel_for(
      label, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t r) {
        body(StridedRow{(r / inner) * n * inner + r % inner, n, inner});
      });
}

/// softmax or log-softmax (`log`) of one row: one exponential per element, written once and then
/// scaled (or, for log-softmax, only summed); fast_exp vectorises where expf is a call per
/// element. `Log` is std::true_type / std::false_type where the host rows run (a branch in their
/// loops stops vectorisation) and bool elsewhere (strided rows: there the compile-time form turns
/// the stores into scatters and runs ~20% slower).
template <class Log>
struct SoftmaxBody {
  FView x, y;
  Log log;
  // The flag as a bool, by Log::value for the compile-time forms (their operator bool is a host
  // function to nvcc).
  KOKKOS_INLINE_FUNCTION static constexpr bool is_log(const Log& l) {
    if constexpr (std::is_same_v<Log, bool>)
      return l;
    else
      return Log::value;
  }
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(const Row& row) const {
    const bool take_log = is_log(log);
    const float m = row.max(x);
    const float s = row.sum([&](std::int64_t k) {
      const float e = impl::fast_exp(x(k) - m);
      if (!take_log)
        y(k) = e;
      return e;
    });
    if (take_log) {
      const float shift = m + ::logf(s);
      row.for_each([&](std::int64_t k) { y(k) = x(k) - shift; });
    } else {
      const float inv = 1.f / s;
      row.for_each([&](std::int64_t k) { y(k) *= inv; });
    }
  }
};

/// The gradient of one row: softmax dx = y * (dy - sum(dy * y)); log-softmax
/// dx = dy - exp(y) * sum(dy). dx may be dy (each value read before it is written). Where `bits`
/// holds storage, dx's bf16 bit patterns are written too, while the row is in cache (the copy its
/// bf16 contractions read). `Log` and `Bits` as SoftmaxBody's `Log`: compile-time on host rows.
template <class Log, class Bits>
struct SoftmaxGradBody {
  FView y, dy, dx;
  View<std::uint16_t> bits;
  Log log;
  Bits with_bits;
  template <class F>
  KOKKOS_INLINE_FUNCTION static constexpr bool flag(const F& f) {
    if constexpr (std::is_same_v<F, bool>)
      return f;
    else
      return F::value;
  }
  template <class Row>
  KOKKOS_INLINE_FUNCTION void operator()(const Row& row) const {
    const bool take_log = flag(log), write_bits = flag(with_bits);
    const float s = row.sum([&](std::int64_t k) { return take_log ? dy(k) : dy(k) * y(k); });
    row.for_each([&](std::int64_t k) {
      const float g = take_log ? dy(k) - impl::fast_exp(y(k)) * s : y(k) * (dy(k) - s);
      dx(k) = g;
      if (write_bits)
        bits(k) = to_bfloat16_bits(g);
    });
  }
};

}  // namespace detail::softmax_impl

FView softmax(const ExecSpace& space, const Shape& shape, const FView& x, int dim, bool log) {
  using namespace detail::softmax_impl;
  const char* where = "mtk::kernels::softmax";
  const char* label = log ? "mtk::kernels::log_softmax" : where;
  check_dim(where, shape, dim);
  check_size(where, shape, x, "input");
  FView y = alloc<float>(label, shape.num_elements());
  if (shape.num_elements() == 0)
    return y;
  if (!contiguous_host_rows(shape, dim))
    for_each_row(space, where, label, shape, dim, SoftmaxBody<bool>{x, y, log}, true);
  else if (log)
    for_each_row(space, where, label, shape, dim, SoftmaxBody<std::true_type>{x, y, {}}, true);
  else
    for_each_row(space, where, label, shape, dim, SoftmaxBody<std::false_type>{x, y, {}}, true);
  return y;
}

FView softmax_grad(const ExecSpace& space, const Shape& shape, const FView& y, const FView& dy,
                   int dim, bool log, const FView& into, const View<std::uint16_t>& bf16_into) {
  using namespace detail::softmax_impl;
  using std::false_type, std::true_type;
  const char* where = "mtk::kernels::softmax_grad";
  const char* label = log ? "mtk::kernels::log_softmax_grad" : where;
  check_dim(where, shape, dim);
  check_size(where, shape, y, "output y");
  check_size(where, shape, dy, "gradient dy");
  if (into.data())
    check_size(where, shape, into, "given output dx");
  if (bf16_into.data() && static_cast<std::int64_t>(bf16_into.extent(0)) != shape.num_elements())
    fail(where, cat("the given bf16 copy holds ", bf16_into.extent(0), " values, the shape ",
                    shape.to_string(), " ", shape.num_elements()));
  FView dx = into.data() ? into : alloc<float>(label, shape.num_elements());
  if (shape.num_elements() == 0)
    return dx;
  const bool bits = bf16_into.data() != nullptr;
  const auto run = [&](auto body) { for_each_row(space, where, label, shape, dim, body, true); };
  if (!contiguous_host_rows(shape, dim))
    run(SoftmaxGradBody<bool, bool>{y, dy, dx, bf16_into, log, bits});
  else if (log && bits)
    run(SoftmaxGradBody<true_type, true_type>{y, dy, dx, bf16_into, {}, {}});
  else if (log)
    run(SoftmaxGradBody<true_type, false_type>{y, dy, dx, bf16_into, {}, {}});
  else if (bits)
    run(SoftmaxGradBody<false_type, true_type>{y, dy, dx, bf16_into, {}, {}});
  else
    run(SoftmaxGradBody<false_type, false_type>{y, dy, dx, bf16_into, {}, {}});
  return dx;
}

}  // namespace mtk::kernels
