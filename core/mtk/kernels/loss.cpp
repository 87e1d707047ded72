// mtk::kernels fused softmax cross-entropy — see loss.hpp. No one-hot or probability tensor: the
// largest activations of a language model (logits [tokens, vocab]) are read once by the forward
// (all four row statistics, each row swept twice while it sits in cache) and once by the backward,
// which writes their gradient.

#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/impl/fast_exp.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/loss.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mtk::kernels {
namespace detail::loss_impl {

// [outer][V][inner] around `dim`.
struct Rows {
  std::int64_t outer = 1, v = 1, inner = 1;
  Rows(const Shape& s, int dim) {
    if (dim < 0 || dim >= s.rank())
      fail("mtk::kernels::cross_entropy", cat("dim ", dim, " outside ", s.to_string()));
    const Around a(s, dim);
    outer = a.outer;
    v = a.n;
    inner = a.inner;
  }
  std::int64_t rows() const { return outer * inner; }
};

void check_rows(const char* where, const Rows& r, std::int64_t n, const char* what) {
  if (n != r.rows())
    fail(where, cat(what, " holds ", n, " values for ", r.rows(), " rows"));
}

using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;

// cross_entropy_stats off the host: a team per row, its threads reading the row side by side (a
// thread per row is a few thousand GPU threads, each sweeping a 32000-value row alone).
void stats_by_teams(const ExecSpace& space, const char* where, const FView& x, const IView& targets,
                    std::int64_t origin, std::int64_t n, std::int64_t V, std::int64_t inner,
                    const FView& st) {
  Kokkos::parallel_for(
      where, TeamPolicy(space, impl::team_league(where, n), Kokkos::AUTO),
      KOKKOS_LAMBDA(const TeamPolicy::member_type& tm) {
        const std::int64_t row = tm.league_rank();
        const std::int64_t base = (row / inner) * V * inner + row % inner;
        const auto range = Kokkos::TeamThreadRange(tm, V);
        float m = 0;
        Kokkos::parallel_reduce(
            range,
            [&](std::int64_t j, float& lm) {
              const float v = x(base + j * inner);
              lm = v > lm ? v : lm;
            },
            Kokkos::Max<float>(m));
        double sum = 0, s = 0;
        Kokkos::parallel_reduce(
            range, [&](std::int64_t j, double& a) { a += x(base + j * inner); }, sum);
        Kokkos::parallel_reduce(
            range, [&](std::int64_t j, double& a) { a += impl::fast_exp(x(base + j * inner) - m); },
            s);
        Kokkos::single(Kokkos::PerTeam(tm), [&]() {
          const std::int64_t t = targets(row) - origin;
          st(row) = m;
          st(n + row) = static_cast<float>(s);
          st(2 * n + row) = (t >= 0 && t < V) ? x(base + t * inner) : 0.0f;
          st(3 * n + row) = static_cast<float>(sum);
        });
      });
}

}  // namespace detail::loss_impl

using detail::loss_impl::Rows;

FView cross_entropy_stats(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                          const IView& targets, std::int64_t origin) {
  const char* where = "mtk::kernels::cross_entropy_stats";
  const Rows r(shape, dim);
  detail::loss_impl::check_rows(where, r, static_cast<std::int64_t>(targets.extent(0)), "targets");
  if (static_cast<std::int64_t>(x.extent(0)) != shape.num_elements())
    fail(where, cat("logits hold ", x.extent(0), " values for ", shape.to_string()));
  const std::int64_t n = r.rows(), V = r.v, inner = r.inner;
  FView st = impl::alloc<float>(where, 4 * n);
  const float lowest = -std::numeric_limits<float>::infinity();
  if (impl::device_paths()) {
    detail::loss_impl::stats_by_teams(space, where, x, targets, origin, n, V, inner, st);
    return st;
  }
  if (inner == 1) {
    // Contiguous rows: lanes of independent accumulators so that both sweeps vectorise; the
    // second sweep reads the row from cache.
    Kokkos::parallel_for(
        where, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t row) {
          constexpr int L = 8;             // independent accumulators (vector lanes)
          constexpr std::int64_t C = 256;  // float lane sums flushed to double every C values
          const std::int64_t base = row * V;
          // Sweep 1: the max, as an integer max reduction.
          std::int32_t km = impl::float_key(lowest);
          for (std::int64_t j = 0; j < V; ++j) {
            const std::int32_t k = impl::float_key(x(base + j));
            km = k > km ? k : km;
          }
          const float m = impl::key_float(km);
          // Sweep 2 (from cache): the sums of x and of exp(x - m).
          double sum = 0, s = 0;
          for (std::int64_t c0 = 0; c0 < V; c0 += C) {
            const std::int64_t c1 = c0 + C < V ? c0 + C : V;
            float ax[L], ae[L];
            for (int k = 0; k < L; ++k) {
              ax[k] = 0;
              ae[k] = 0;
            }
            std::int64_t j = c0;
            for (; j + L <= c1; j += L)
              for (int k = 0; k < L; ++k) {
                const float v = x(base + j + k);
                ax[k] += v;
                ae[k] += impl::fast_exp(v - m);
              }
            for (; j < c1; ++j) {
              ax[0] += x(base + j);
              ae[0] += impl::fast_exp(x(base + j) - m);
            }
            for (int k = 0; k < L; ++k) {
              sum += ax[k];
              s += ae[k];
            }
          }
          const std::int64_t t = targets(row) - origin;
          st(row) = m;
          st(n + row) = static_cast<float>(s);
          st(2 * n + row) = (t >= 0 && t < V) ? x(base + t) : 0.0f;
          st(3 * n + row) = static_cast<float>(sum);
        });
    return st;
  }
  Kokkos::parallel_for(
      where, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t row) {
        const std::int64_t o = row / inner, i = row % inner, base = o * V * inner + i;
        float m = lowest;
        double sum = 0;
        for (std::int64_t j = 0; j < V; ++j) {
          const float v = x(base + j * inner);
          m = v > m ? v : m;
          sum += v;
        }
        double s = 0;
        for (std::int64_t j = 0; j < V; ++j)
          s += impl::fast_exp(x(base + j * inner) - m);
        const std::int64_t t = targets(row) - origin;
        st(row) = m;
        st(n + row) = static_cast<float>(s);
        st(2 * n + row) = (t >= 0 && t < V) ? x(base + t * inner) : 0.0f;
        st(3 * n + row) = static_cast<float>(sum);
      });
  return st;
}

void cross_entropy_rebase(const ExecSpace& space, FView& stats, const FView& global_max) {
  const std::int64_t n = static_cast<std::int64_t>(global_max.extent(0));
  if (static_cast<std::int64_t>(stats.extent(0)) != 4 * n)
    fail("mtk::kernels::cross_entropy_rebase",
         cat("statistics hold ", stats.extent(0), " values for ", n, " rows (need 4 per row)"));
  Kokkos::parallel_for(
      "mtk::kernels::cross_entropy_rebase", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t row) {
        const float M = global_max(row);
        stats(n + row) *= impl::fast_exp(stats(row) - M);
        stats(row) = M;
      });
}

void cross_entropy_from_stats(const ExecSpace& space, const FView& stats, double label_smoothing,
                              std::int64_t vocab_size, double z_loss, FView& loss, FView& lse) {
  if (stats.extent(0) % 4 != 0)
    fail("mtk::kernels::cross_entropy_from_stats",
         cat("statistics hold ", stats.extent(0), " values, not 4 per row"));
  const std::int64_t n = static_cast<std::int64_t>(stats.extent(0) / 4);
  FView out = impl::alloc<float>("mtk::kernels::cross_entropy", n);
  FView l_out = impl::alloc<float>("mtk::kernels::cross_entropy_lse", n);
  const float keep = static_cast<float>(1.0 - label_smoothing);
  const float spread = static_cast<float>(label_smoothing / static_cast<double>(vocab_size));
  const float z = static_cast<float>(z_loss);
  Kokkos::parallel_for(
      "mtk::kernels::cross_entropy_from_stats", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t k) {
        const float l = stats(k) + ::logf(stats(n + k));
        l_out(k) = l;
        out(k) = l - keep * stats(2 * n + k) - spread * stats(3 * n + k) + z * l * l;
      });
  loss = out;
  lse = l_out;
}

namespace {

// What one gradient kernel reads and writes: the logits x, the float32 gradient `out` (null with
// bits alone) and its bf16 bits (null without), per row lse, dy and the target.
struct GradTerms {
  const float* x = nullptr;
  float* out = nullptr;
  std::uint16_t* bits = nullptr;
  IView targets;
  FView lse, dy;
  std::int64_t origin = 0, V = 1, inner = 1;
  float keep = 1, spread = 0, z2 = 0;
};

// f over [0, n) in one kernel or, writing bits alone over the inputs' storage, over [0, 1),
// [1, 2), [2, 4), [4, 8), ...: when item k writes 2-byte results at bytes [2k, 2k + 2) of the
// 4-byte inputs, every range writes only bytes the ranges before it have read (item k's own input
// excepted, which it reads first).
template <class F>
void launch(const ExecSpace& space, std::int64_t n, bool bits_only, const F& f) {
  if (!bits_only) {
    Kokkos::parallel_for("mtk::kernels::cross_entropy_grad", impl::Range(space, 0, n), f);
    return;
  }
  for (std::int64_t begin = 0, end = 1; begin < n; begin = end, end = std::min(n, 2 * end))
    Kokkos::parallel_for("mtk::kernels::cross_entropy_grad bf16", impl::Range(space, begin, end),
                         f);
}

// A thread per element, the rows' formula and order of operations (bitwise their result).
void elementwise_grad(const ExecSpace& space, const GradTerms& g, std::int64_t n, bool bits_only) {
  launch(
      space, n, bits_only, KOKKOS_LAMBDA(std::int64_t k) {
        const std::int64_t i = fast_mod(k, g.inner), rest = fast_div(k, g.inner);
        const std::int64_t j = fast_mod(rest, g.V), row = fast_div(rest, g.V) * g.inner + i;
        const float l = g.lse(row), d = g.dy(row), gs = d * (1.0f + g.z2 * l), gd = d * g.spread;
        float o = impl::fast_exp(g.x[k] - l) * gs - gd;
        if (g.targets(row) - g.origin == j)
          o -= d * g.keep;
        if (g.out)
          g.out[k] = o;
        if (g.bits)
          g.bits[k] = to_bfloat16_bits(o);
      });
}

// Rows contiguous (the vocabulary is the last dim): no index division. In place, each block of the
// row is copied to the stack first: the vectorised exponential loop that loads and stores the
// same addresses runs at half the speed (measured on AVX-512 Xeons: 115 ms against 51 ms for the
// [2048, 32000] logits). A row's bits alone land in the rows before it (the first row's: in what
// it has read).
void row_grad(const ExecSpace& space, const GradTerms& g, std::int64_t rows, bool bits_only) {
  const bool in_place = g.x == g.out || bits_only;
  launch(
      space, rows, bits_only, KOKKOS_LAMBDA(std::int64_t row) {
        const float l = g.lse(row), d = g.dy(row), gs = d * (1.0f + g.z2 * l), gd = d * g.spread;
        const std::int64_t t = g.targets(row) - g.origin, base = row * g.V, V = g.V;
        if (in_place) {
          constexpr std::int64_t B = 256;
          float block[B];
          for (std::int64_t j0 = 0; j0 < V; j0 += B) {
            const std::int64_t m = V - j0 < B ? V - j0 : B;
            for (std::int64_t j = 0; j < m; ++j)
              block[j] = g.x[base + j0 + j];
            for (std::int64_t j = 0; j < m; ++j)
              block[j] = impl::fast_exp(block[j] - l) * gs - gd;
            if (t >= j0 && t < j0 + m)
              block[t - j0] -= d * g.keep;
            if (g.out)
              for (std::int64_t j = 0; j < m; ++j)
                g.out[base + j0 + j] = block[j];
            else
              bf16_bits_run(block, g.bits + base + j0, m);
          }
        } else {
          const float* xr = g.x + base;
          float* o = g.out + base;
          for (std::int64_t j = 0; j < V; ++j)
            o[j] = impl::fast_exp(xr[j] - l) * gs - gd;
          if (t >= 0 && t < V)
            o[t] -= d * g.keep;
        }
        if (g.out && g.bits)
          bf16_bits_run(g.out + base, g.bits + base, V);
      });
}

// Rows strided (dims after the vocabulary), on the host.
void strided_grad(const ExecSpace& space, const GradTerms& g, std::int64_t n, bool bits_only) {
  launch(
      space, n, bits_only, KOKKOS_LAMBDA(std::int64_t k) {
        const std::int64_t i = k % g.inner, rest = k / g.inner, j = rest % g.V, o = rest / g.V;
        const std::int64_t row = o * g.inner + i;
        const float l = g.lse(row);
        const float p = impl::fast_exp(g.x[k] - l) * (1.0f + g.z2 * l);
        const float hot = (g.targets(row) - g.origin == j) ? g.keep : 0.0f;
        const float value = g.dy(row) * (p - hot - g.spread);
        if (g.out)
          g.out[k] = value;
        if (g.bits)
          g.bits[k] = to_bfloat16_bits(value);
      });
}

}  // namespace

FView cross_entropy_grad(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                         const IView& targets, std::int64_t origin, const FView& lse,
                         const FView& dy, double label_smoothing, std::int64_t vocab_size,
                         double z_loss, const FView& into, const View<std::uint16_t>& bf16_into,
                         bool bits_only) {
  const Rows r(shape, dim);
  detail::loss_impl::check_rows("mtk::kernels::cross_entropy_grad", r,
                                static_cast<std::int64_t>(lse.extent(0)), "lse");
  detail::loss_impl::check_rows("mtk::kernels::cross_entropy_grad", r,
                                static_cast<std::int64_t>(dy.extent(0)), "dy");
  if (into.data() && into.extent(0) != x.extent(0))
    fail("mtk::kernels::cross_entropy_grad",
         cat("the given output holds ", into.extent(0), " elements but the logits ", x.extent(0)));
  if (bf16_into.data() && bf16_into.extent(0) != x.extent(0))
    fail("mtk::kernels::cross_entropy_grad", cat("the given bf16 copy holds ", bf16_into.extent(0),
                                                 " elements but the logits ", x.extent(0)));
  FView out = into.data() ? into
                          : impl::alloc<float>("mtk::kernels::cross_entropy_grad",
                                               static_cast<std::int64_t>(x.extent(0)));
  // The bf16 copy, when asked for, is written as each row is finished (while it is in cache):
  // the bit patterns a later bf16 contraction would convert it to. With `bits_only` it is all
  // that is written, into the output's own storage (out may be x).
  GradTerms g;
  g.x = x.data();
  g.out = bits_only ? nullptr : out.data();
  g.bits = bits_only ? reinterpret_cast<std::uint16_t*>(out.data()) : bf16_into.data();
  g.targets = targets;
  g.lse = lse;
  g.dy = dy;
  g.origin = origin;
  g.V = r.v;
  g.inner = r.inner;
  g.keep = static_cast<float>(1.0 - label_smoothing);
  g.spread = static_cast<float>(label_smoothing / static_cast<double>(vocab_size));
  g.z2 = static_cast<float>(2.0 * z_loss);
  const auto n = static_cast<std::int64_t>(x.extent(0));
  if (impl::device_paths())
    elementwise_grad(space, g, n, bits_only);
  else if (r.inner == 1)
    row_grad(space, g, r.rows(), bits_only);
  else
    strided_grad(space, g, n, bits_only);
  return out;
}

}  // namespace mtk::kernels
