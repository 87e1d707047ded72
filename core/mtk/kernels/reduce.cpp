// mtk::kernels reductions: reduce, softmax / log-softmax and their gradient (cumsum and top_1:
// scan.cpp).
// See reduce.hpp for the contracts.
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/impl/fast_exp.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/shape_checks.hpp>
#include <mtk/kernels/kernels.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace mtk::kernels {
namespace detail::reduce_impl {

using impl::alloc;
using impl::check_dim;
using impl::check_size;
using impl::host_exec;

// The reduction as a few collapsed groups of dims: size-1 dims are dropped and neighbours that stay
// neighbours (both reduced, or both kept and consecutive in out) are merged.
struct Group {
  std::int64_t size = 1, stride = 1;
  bool kept = false;
  int out_pos = -1;  // position among out's non-trivial dims (last merged dim), kept groups only
};

struct Plan {
  std::vector<Group> groups;  // in in_shape's order
  IndexMap out_map;           // out elements (collapsed, out order) -> offset in x
  IndexMap red_map;           // reduced elements (collapsed, in order) -> offset relative to base
  int n_kept = 0, n_red = 0;
  std::int64_t red_count = 1;
};

Plan make_plan(const char* where, const Shape& in, const Shape& out) {
  for (int i = 0; i < out.rank(); ++i) {
    const int j = in.index_of(out[i].name);
    if (j < 0)
      fail(where, cat("dimension '", out[i].name, "' of output ", out.to_string(),
                      " is not in input ", in.to_string()));
    if (in[j].size != out[i].size)
      fail(where, cat("dimension '", out[i].name, "' has size ", in[j].size, " in input ",
                      in.to_string(), " but ", out[i].size, " in output ", out.to_string()));
  }
  // Positions of out's non-trivial dims.
  std::vector<int> out_pos(static_cast<size_t>(out.rank()), -1);
  for (int i = 0, p = 0; i < out.rank(); ++i)
    if (out[i].size != 1)
      out_pos[static_cast<size_t>(i)] = p++;
  const auto strides = in.strides();
  Plan plan;
  for (int i = 0; i < in.rank(); ++i) {
    if (in[i].size == 1)
      continue;
    Group g;
    g.size = in[i].size;
    g.stride = strides[static_cast<size_t>(i)];
    const int o = out.index_of(in[i].name);
    g.kept = o >= 0;
    g.out_pos = g.kept ? out_pos[static_cast<size_t>(o)] : -1;
    if (!plan.groups.empty()) {
      Group& prev = plan.groups.back();
      if ((!prev.kept && !g.kept) || (prev.kept && g.kept && g.out_pos == prev.out_pos + 1)) {
        prev.size *= g.size;
        prev.stride = g.stride;
        prev.out_pos = g.out_pos;
        continue;
      }
    }
    plan.groups.push_back(g);
  }
  std::vector<const Group*> kept;
  for (const auto& g : plan.groups) {
    if (g.kept) {
      kept.push_back(&g);
    } else {
      ++plan.n_red;
      plan.red_count *= g.size;
    }
  }
  std::sort(kept.begin(), kept.end(),
            [](const Group* a, const Group* b) { return a->out_pos < b->out_pos; });
  plan.n_kept = static_cast<int>(kept.size());
  if (plan.n_kept > max_rank || plan.n_red > max_rank)
    fail(where, cat("reducing ", in.to_string(), " to ", out.to_string(), " needs more than ",
                    max_rank, " separate dimension groups"));
  plan.out_map.rank = plan.n_kept;
  for (int i = 0; i < plan.n_kept; ++i) {
    plan.out_map.extent[i] = kept[static_cast<size_t>(i)]->size;
    plan.out_map.stride[i] = kept[static_cast<size_t>(i)]->stride;
  }
  plan.red_map.rank = plan.n_red;
  int r = 0;
  for (const auto& g : plan.groups) {
    if (g.kept)
      continue;
    plan.red_map.extent[r] = g.size;
    plan.red_map.stride[r] = g.stride;
    ++r;
  }
  return plan;
}

template <class T, class Acc, ReduceFn F>
struct Combine {
  KOKKOS_INLINE_FUNCTION static void apply(Acc& a, T v) {
    if constexpr (F == ReduceFn::sum) {
      a += static_cast<Acc>(v);
    } else if constexpr (F == ReduceFn::sum_squares) {
      const T sq = v * v;  // rounded to T as square() would
      a += static_cast<Acc>(sq);
    } else if constexpr (F == ReduceFn::max) {
      if (static_cast<Acc>(v) > a)
        a = static_cast<Acc>(v);
    } else {
      if (static_cast<Acc>(v) < a)
        a = static_cast<Acc>(v);
    }
  }
};

template <class T, ReduceFn F>
constexpr bool is_sum = F == ReduceFn::sum || F == ReduceFn::sum_squares;

template <class T, ReduceFn F>
using AccOf = std::conditional_t<is_sum<T, F> && std::is_floating_point_v<T>, double, T>;

template <class T, ReduceFn F>
AccOf<T, F> identity() {
  using L = std::numeric_limits<AccOf<T, F>>;
  if constexpr (is_sum<T, F>)
    return AccOf<T, F>(0);
  if constexpr (F == ReduceFn::max)
    return L::has_infinity ? -L::infinity() : L::lowest();
  return L::has_infinity ? L::infinity() : L::max();
}

// [reduced][kept] on the host: a block of columns per iteration, its rows swept in order. Each
// output element sums its column in the same order as one-column-per-element would, but memory
// is read row by row (a column walk strides a whole row per element: 20-50x slower on
// [2048][512], the bias and norm gradients of a Transformer).
template <class T, ReduceFn F>
View<T> column_sums_by_rows(const ExecSpace& space, const View<T>& x, const View<T>& out,
                            std::int64_t out_n, std::int64_t nred) {
  using Acc = AccOf<T, F>;
  using C = Combine<T, Acc, F>;
  constexpr std::int64_t cols = 256;
  const Acc init = identity<T, F>();
  Kokkos::parallel_for(
      "mtk::kernels::reduce", impl::Range(space, 0, (out_n + cols - 1) / cols),
      KOKKOS_LAMBDA(std::int64_t blk) {
        const std::int64_t k0 = blk * cols, nk = out_n - k0 < cols ? out_n - k0 : cols;
        Acc a[cols];
        for (std::int64_t k = 0; k < nk; ++k)
          a[k] = init;
        for (std::int64_t r = 0; r < nred; ++r) {
          const std::int64_t row = r * out_n + k0;
          for (std::int64_t k = 0; k < nk; ++k)
            C::apply(a[k], x(row + k));
        }
        for (std::int64_t k = 0; k < nk; ++k)
          out(k0 + k) = static_cast<T>(a[k]);
      });
  return out;
}

// Every element reduced to one value.
template <class T, ReduceFn F>
AccOf<T, F> full_reduction(const ExecSpace& space, const View<T>& x) {
  using Acc = AccOf<T, F>;
  using C = Combine<T, Acc, F>;
  const char* label = "mtk::kernels::reduce";
  const Acc init = identity<T, F>();
  Acc result = init;
  const std::int64_t n = static_cast<std::int64_t>(x.extent(0));
  auto body = KOKKOS_LAMBDA(std::int64_t i, Acc & a) {
    C::apply(a, x(i));
  };
  if constexpr (host_exec && is_sum<T, F> && std::is_floating_point_v<T>) {
    // Blocks summed in 8 independent double lanes, which the compiler vectorises: one chain of
    // dependent double adds runs 4-8x slower (global norms of 16M-element gradients).
    constexpr std::int64_t block = 4096;
    const T* p = x.data();
    Kokkos::parallel_reduce(
        label, impl::Range(space, 0, (n + block - 1) / block),
        KOKKOS_LAMBDA(std::int64_t blk, Acc & a) {
          const std::int64_t lo = blk * block, hi = lo + block < n ? lo + block : n;
          Acc lane[8] = {};
          std::int64_t i = lo;
          for (; i + 8 <= hi; i += 8)
            for (int l = 0; l < 8; ++l)
              C::apply(lane[l], p[i + l]);
          for (; i < hi; ++i)
            C::apply(lane[0], p[i]);
          a += ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
               ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        },
        result);
  } else if constexpr (is_sum<T, F>)
    Kokkos::parallel_reduce(label, impl::Range(space, 0, n), body, result);
  else if constexpr (F == ReduceFn::max)
    Kokkos::parallel_reduce(label, impl::Range(space, 0, n), body, Kokkos::Max<Acc>(result));
  else
    Kokkos::parallel_reduce(label, impl::Range(space, 0, n), body, Kokkos::Min<Acc>(result));
  return result;
}

template <class T, ReduceFn F>
View<T> run(const ExecSpace& space, const Plan& plan, const View<T>& x, std::int64_t out_n) {
  using Acc = AccOf<T, F>;
  using C = Combine<T, Acc, F>;
  const char* label = "mtk::kernels::reduce";
  const Acc init = identity<T, F>();
  View<T> out = alloc<T>(label, out_n);
  if (out_n == 0)
    return out;
  if (plan.red_count == 0 || x.extent(0) == 0) {  // a reduced dim of size 0
    Kokkos::deep_copy(space, out, static_cast<T>(init));
    return out;
  }
  const IndexMap om = plan.out_map, rm = plan.red_map;
  const std::int64_t nred = plan.red_count;
  if (plan.n_red == 0) {  // nothing reduced: a copy (of the squares for sum_squares)
    if (plan.n_kept <= 1 && F != ReduceFn::sum_squares) {
      Kokkos::deep_copy(space, out, x);
      return out;
    }
    Kokkos::parallel_for(
        label, impl::Range(space, 0, out_n), KOKKOS_LAMBDA(std::int64_t k) {
          const T v = x(om.offset(k));
          out(k) = F == ReduceFn::sum_squares ? v * v : v;
        });
    return out;
  }
  if (plan.n_kept == 0) {  // everything reduced: one parallel reduction
    Kokkos::deep_copy(space, out, static_cast<T>(full_reduction<T, F>(space, x)));
    return out;
  }
  const Group& g0 = plan.groups.front();
  if (plan.groups.size() == 2 && g0.kept) {  // [kept][reduced]: contiguous rows
    Kokkos::parallel_for(
        label, impl::Range(space, 0, out_n), KOKKOS_LAMBDA(std::int64_t k) {
          Acc a = init;
          const std::int64_t base = k * nred;
          for (std::int64_t r = 0; r < nred; ++r)
            C::apply(a, x(base + r));
          out(k) = static_cast<T>(a);
        });
    return out;
  }
  if constexpr (host_exec) {
    if (plan.groups.size() == 2)  // [reduced][kept] on the host: rows streamed
      return column_sums_by_rows<T, F>(space, x, out, out_n, nred);
  }
  if (plan.groups.size() == 2) {  // [reduced][kept]: one column per output element
    Kokkos::parallel_for(
        label, impl::Range(space, 0, out_n), KOKKOS_LAMBDA(std::int64_t k) {
          Acc a = init;
          for (std::int64_t r = 0; r < nred; ++r)
            C::apply(a, x(r * out_n + k));
          out(k) = static_cast<T>(a);
        });
    return out;
  }
  Kokkos::parallel_for(
      label, impl::Range(space, 0, out_n), KOKKOS_LAMBDA(std::int64_t k) {
        Acc a = init;
        const std::int64_t base = om.offset(k);
        for (std::int64_t r = 0; r < nred; ++r)
          C::apply(a, x(base + rm.offset(r)));
        out(k) = static_cast<T>(a);
      });
  return out;
}

// ---------------------------------------------------------------- row-wise kernels
//
// softmax, log-softmax and their gradients run one skeleton (for_each_row): a body written once
// against a row's three primitives (max, sum, for_each over the row's elements, each given its
// element index) and three ways of running a row:
//   HostRow     host, contiguous rows: plain loops the compiler vectorises (an integer max, lanes
//   of
//               independent sums), each row swept while it sits in cache (softmax only)
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

}  // namespace detail::reduce_impl

template <class T>
View<T> reduce(const ExecSpace& space, ReduceFn fn, const Shape& in_shape, const View<T>& x,
               const Shape& out_shape) {
  using namespace detail::reduce_impl;
  const char* where = "mtk::kernels::reduce";
  check_size(where, in_shape, x, "input");
  const Plan plan = make_plan(where, in_shape, out_shape);
  if (fn == ReduceFn::sum_squares && !std::is_floating_point_v<T>)
    fail(where, "a sum of squares of integers (it would overflow); cast to float32 first");
  Kokkos::Profiling::pushRegion(where);
  View<T> out;
  switch (fn) {
    case ReduceFn::sum:
      out = run<T, ReduceFn::sum>(space, plan, x, out_shape.num_elements());
      break;
    case ReduceFn::max:
      out = run<T, ReduceFn::max>(space, plan, x, out_shape.num_elements());
      break;
    case ReduceFn::min:
      out = run<T, ReduceFn::min>(space, plan, x, out_shape.num_elements());
      break;
    case ReduceFn::sum_squares:
      if constexpr (std::is_floating_point_v<T>)
        out = run<T, ReduceFn::sum_squares>(space, plan, x, out_shape.num_elements());
      break;
  }
  Kokkos::Profiling::popRegion();
  return out;
}

template View<float> reduce<float>(const ExecSpace&, ReduceFn, const Shape&, const View<float>&,
                                   const Shape&);
template View<std::int32_t> reduce<std::int32_t>(const ExecSpace&, ReduceFn, const Shape&,
                                                 const View<std::int32_t>&, const Shape&);

// ---------------------------------------------------------------- softmax

FView softmax(const ExecSpace& space, const Shape& shape, const FView& x, int dim, bool log) {
  using namespace detail::reduce_impl;
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
  using namespace detail::reduce_impl;
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
