// mtk::kernels reductions: reduce (softmax: softmax.cpp; cumsum and top_1: scan.cpp).
// See reduce.hpp for the contracts.
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/impl/fast_exp.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/shape_checks.hpp>
#include <mtk/kernels/reduce.hpp>

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

// [kept][reduced][kept] on the host, x as [outer][nred][inner] (outer 1: [reduced][kept]): a
// block of columns per iteration, its rows swept in order. Each output element sums its column in
// the same order as one-column-per-element would, but memory is read row by row (a column walk
// strides a whole row per element: 20-50x slower on [2048][512], the bias and norm gradients of a
// Transformer; pooling's max over the taps of [positions][taps][channels] patches).
template <class T, ReduceFn F>
View<T> column_sums_by_rows(const ExecSpace& space, const View<T>& x, const View<T>& out,
                            std::int64_t outer, std::int64_t nred, std::int64_t inner) {
  using Acc = AccOf<T, F>;
  using C = Combine<T, Acc, F>;
  constexpr std::int64_t cols = 256;
  const Acc init = identity<T, F>();
  const std::int64_t per_row = (inner + cols - 1) / cols;
  Kokkos::parallel_for(
      "mtk::kernels::reduce", impl::Range(space, 0, outer * per_row),
      KOKKOS_LAMBDA(std::int64_t blk) {
        const std::int64_t o = blk / per_row, k0 = blk % per_row * cols;
        const std::int64_t nk = inner - k0 < cols ? inner - k0 : cols;
        Acc a[cols];
        for (std::int64_t k = 0; k < nk; ++k)
          a[k] = init;
        for (std::int64_t r = 0; r < nred; ++r) {
          const std::int64_t row = (o * nred + r) * inner + k0;
          for (std::int64_t k = 0; k < nk; ++k)
            C::apply(a[k], x(row + k));
        }
        for (std::int64_t k = 0; k < nk; ++k)
          out(o * inner + k0 + k) = static_cast<T>(a[k]);
      });
  return out;
}

// Two accumulators of one output merged (chunked_reduction's second pass).
template <class Acc, ReduceFn F>
KOKKOS_INLINE_FUNCTION void merge(Acc& a, Acc b) {
  if constexpr (F == ReduceFn::sum || F == ReduceFn::sum_squares)
    a += b;
  else if constexpr (F == ReduceFn::max)
    a = b > a ? b : a;
  else
    a = b < a ? b : a;
}

// The reduced range of every output cut into chunks of `rows` (a function of the shape alone, so
// the result does not depend on the device): thread (chunk, k) reduces its chunk of output k, then
// each output merges its chunks in order. A thread per output (reduce's host form) gives a GPU a
// few thousand threads with long serial loops; here there are ~2^18, and for [reduced][kept]
// consecutive threads read consecutive columns. `at(k, r)` is the offset in x of output k's
// reduced element r.
template <class T, ReduceFn F, class At>
void chunked_reduction(const ExecSpace& space, const View<T>& x, const View<T>& out,
                       std::int64_t out_n, std::int64_t nred, const At& at) {
  using Acc = AccOf<T, F>;
  using C = Combine<T, Acc, F>;
  const char* label = "mtk::kernels::reduce";
  constexpr std::int64_t threads = std::int64_t(1) << 18, min_rows = 32;
  const std::int64_t want = std::max<std::int64_t>(1, threads / out_n);
  const std::int64_t rows = std::max(min_rows, (nred + want - 1) / want);
  const std::int64_t chunks = (nred + rows - 1) / rows;
  const Acc init = identity<T, F>();
  if (chunks == 1) {
    Kokkos::parallel_for(
        label, impl::Range(space, 0, out_n), KOKKOS_LAMBDA(std::int64_t k) {
          Acc a = init;
          for (std::int64_t r = 0; r < nred; ++r)
            C::apply(a, x(at(k, r)));
          out(k) = static_cast<T>(a);
        });
    return;
  }
  const View<Acc> part = alloc<Acc>("mtk::kernels::reduce::chunks", chunks * out_n);
  Kokkos::parallel_for(
      label, impl::Range(space, 0, chunks * out_n), KOKKOS_LAMBDA(std::int64_t i) {
        const std::int64_t c = fast_div(i, out_n), k = fast_mod(i, out_n);
        const std::int64_t lo = c * rows, hi = lo + rows < nred ? lo + rows : nred;
        Acc a = init;
        for (std::int64_t r = lo; r < hi; ++r)
          C::apply(a, x(at(k, r)));
        part(i) = a;
      });
  Kokkos::parallel_for(
      label, impl::Range(space, 0, out_n), KOKKOS_LAMBDA(std::int64_t k) {
        Acc a = part(k);
        for (std::int64_t c = 1; c < chunks; ++c)
          merge<Acc, F>(a, part(c * out_n + k));
        out(k) = static_cast<T>(a);
      });
}

// [kept][reduced] (contiguous rows) off the host: a team per row, its threads reading the row
// side by side. Team reductions give the same result for the same launch, whatever runs beside.
template <class T, ReduceFn F>
void row_reduction_by_teams(const ExecSpace& space, const View<T>& x, const View<T>& out,
                            std::int64_t out_n, std::int64_t nred) {
  using Acc = AccOf<T, F>;
  using C = Combine<T, Acc, F>;
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const char* label = "mtk::kernels::reduce";
  const Acc init = identity<T, F>();
  Kokkos::parallel_for(
      label, Policy(space, impl::team_league(label, out_n), Kokkos::AUTO),
      KOKKOS_LAMBDA(const Policy::member_type& t) {
        const std::int64_t base = static_cast<std::int64_t>(t.league_rank()) * nred;
        Acc a = init;
        const auto body = [&](std::int64_t r, Acc& la) { C::apply(la, x(base + r)); };
        const auto range = Kokkos::TeamThreadRange(t, nred);
        if constexpr (F == ReduceFn::max)
          Kokkos::parallel_reduce(range, body, Kokkos::Max<Acc>(a));
        else if constexpr (F == ReduceFn::min)
          Kokkos::parallel_reduce(range, body, Kokkos::Min<Acc>(a));
        else
          Kokkos::parallel_reduce(range, body, a);
        Kokkos::single(Kokkos::PerTeam(t), [&]() { out(t.league_rank()) = static_cast<T>(a); });
      });
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
  if (impl::device_paths()) {  // many threads per output
    if (plan.groups.size() == 2 && g0.kept && nred >= 32) {
      row_reduction_by_teams<T, F>(space, x, out, out_n, nred);
    } else if (plan.groups.size() == 2 && !g0.kept) {
      chunked_reduction<T, F>(
          space, x, out, out_n, nred,
          KOKKOS_LAMBDA(std::int64_t k, std::int64_t r) { return r * out_n + k; });
    } else {
      chunked_reduction<T, F>(
          space, x, out, out_n, nred,
          KOKKOS_LAMBDA(std::int64_t k, std::int64_t r) { return om.offset(k) + rm.offset(r); });
    }
    return out;
  }
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
    if (plan.groups.size() == 2)  // [reduced][kept]: rows streamed
      return column_sums_by_rows<T, F>(space, x, out, 1, nred, out_n);
    const std::vector<Group>& g = plan.groups;
    if (g.size() == 3 && g[0].kept && !g[1].kept && g[2].kept && g[0].out_pos < g[2].out_pos)
      return column_sums_by_rows<T, F>(space, x, out, g[0].size, nred, g[2].size);
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

}  // namespace mtk::kernels
