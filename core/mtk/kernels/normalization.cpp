// mtk::kernels fused layer norm — see normalization.hpp. On the host one thread per row; the row's
// values are read with the stride of `dim` (1 when it is the last dim, as in a transformer's
// activations). Off the host a team per row for the sums and a thread per element otherwise.

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/normalization.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels {
namespace detail::norm_impl {

// [outer][n][inner] around `dim`; row r starts at (r / inner) n inner + r % inner.
struct Rows {
  std::int64_t n = 1, inner = 1, rows = 1;
  Rows(const char* where, const Shape& s, int dim, const FView& x) {
    if (dim < 0 || dim >= s.rank())
      fail(where, cat("dim ", dim, " outside ", s.to_string()));
    if (static_cast<std::int64_t>(x.extent(0)) != s.num_elements())
      fail(where, cat("input holds ", x.extent(0), " values for ", s.to_string()));
    const Around a(s, dim);
    n = a.n;
    inner = a.inner;
    rows = a.outer * a.inner;
  }
  void check(const char* where, const FView& v, std::int64_t want, const char* what) const {
    if (static_cast<std::int64_t>(v.extent(0)) != want)
      fail(where, cat(what, " holds ", v.extent(0), " values, expected ", want));
  }
};

// The sum of f(j), j < n, in double: eight running sums (j mod 8) added in order at the end, so
// the adds do not wait on each other and the loop vectorises; the order depends on n alone.
template <class F>
KOKKOS_INLINE_FUNCTION double lane_sum(std::int64_t n, const F& f) {
  constexpr int L = 8;
  double acc[L] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::int64_t j = 0;
  for (; j + L <= n; j += L)
    for (int l = 0; l < L; ++l)
      acc[l] += f(j + l);
  double s = 0;
  for (int l = 0; l < L; ++l)
    s += acc[l];
  for (; j < n; ++j)
    s += f(j);
  return s;
}

// f over row `row`'s values (strided by inner), contiguous rows read through a pointer.
template <class F>
KOKKOS_INLINE_FUNCTION double row_sum(const float* x, std::int64_t base, std::int64_t n,
                                      std::int64_t inner, const F& f) {
  if (inner == 1) {
    const float* r = x + base;
    return lane_sum(n, [&](std::int64_t j) { return f(r[j], j); });
  }
  return lane_sum(n, [&](std::int64_t j) { return f(x[base + j * inner], j); });
}

using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;

// Off the host (device_paths): a team per row for the row sums, its threads reading the row side
// by side (a thread per row gives a GPU a few thousand threads with serial loops), summed in
// double by the team's reduction. `f(k, j)` is the term of element k, the row's j-th.
template <class F>
void team_row_sums(const ExecSpace& space, const char* where, std::int64_t rows, std::int64_t n,
                   std::int64_t inner, const FView& out, const F& f) {
  Kokkos::parallel_for(
      where, TeamPolicy(space, impl::team_league(where, rows), Kokkos::AUTO),
      KOKKOS_LAMBDA(const TeamPolicy::member_type& t) {
        const std::int64_t row = t.league_rank();
        const std::int64_t base = (row / inner) * n * inner + row % inner;
        double sum = 0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(t, n),
            [&](std::int64_t j, double& s) { s += f(row, base + j * inner, j); }, sum);
        Kokkos::single(Kokkos::PerTeam(t), [&]() { out(row) = static_cast<float>(sum); });
      });
}

// Element k of [outer][n][inner] as its row (as Rows numbers them) and its position j in it:
// the elementwise passes run a thread per element off the host.
struct RowOf {
  std::int64_t n, inner;
  KOKKOS_INLINE_FUNCTION std::int64_t row(std::int64_t k) const {
    return fast_div(k, n * inner) * inner + fast_mod(k, inner);
  }
  KOKKOS_INLINE_FUNCTION std::int64_t j(std::int64_t k) const {
    return fast_mod(fast_div(k, inner), n);
  }
};

}  // namespace detail::norm_impl

using detail::norm_impl::lane_sum;
using detail::norm_impl::row_sum;
using detail::norm_impl::RowOf;
using detail::norm_impl::Rows;
using detail::norm_impl::team_row_sums;

FView layer_norm_sums(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                      const FView& row_sums, std::int64_t d_total) {
  const char* where = "mtk::kernels::layer_norm_sums";
  const Rows r(where, shape, dim, x);
  const bool centred = row_sums.extent(0) > 0;
  if (centred)
    r.check(where, row_sums, r.rows, "row sum");
  FView out = impl::alloc<float>(where, r.rows);
  const std::int64_t n = r.n, inner = r.inner;
  const double inv_d = 1.0 / static_cast<double>(d_total);
  const float* xp = x.data();
  if (impl::device_paths()) {
    team_row_sums(
        space, where, r.rows, n, inner, out,
        KOKKOS_LAMBDA(std::int64_t row, std::int64_t k, std::int64_t) {
          if (!centred)
            return double(xp[k]);
          const double c = xp[k] - row_sums(row) * inv_d;
          return c * c;
        });
    return out;
  }
  Kokkos::parallel_for(
      where, impl::Range(space, 0, r.rows), KOKKOS_LAMBDA(std::int64_t row) {
        const std::int64_t base = (row / inner) * n * inner + row % inner;
        double s = 0;
        if (centred) {
          const double mean = row_sums(row) * inv_d;
          s = row_sum(xp, base, n, inner, [&](float v, std::int64_t) {
            const double c = v - mean;
            return c * c;
          });
        } else {
          s = row_sum(xp, base, n, inner, [](float v, std::int64_t) { return double(v); });
        }
        out(row) = static_cast<float>(s);
      });
  return out;
}

void layer_norm_moments(const ExecSpace& space, const FView& row_sum, const FView& row_sq,
                        std::int64_t d_total, double epsilon, FView& mean, FView& rstd) {
  const char* where = "mtk::kernels::layer_norm_moments";
  const std::int64_t rows = static_cast<std::int64_t>(row_sum.extent(0));
  if (static_cast<std::int64_t>(row_sq.extent(0)) != rows)
    fail(where, cat("sums of squares hold ", row_sq.extent(0), " values for ", rows, " rows"));
  FView m = impl::alloc<float>("mtk::kernels::layer_norm::mean", rows);
  FView rs = impl::alloc<float>("mtk::kernels::layer_norm::rstd", rows);
  const double inv_d = 1.0 / static_cast<double>(d_total);
  Kokkos::parallel_for(
      where, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t row) {
        m(row) = static_cast<float>(row_sum(row) * inv_d);
        rs(row) = static_cast<float>(1.0 / ::sqrt(row_sq(row) * inv_d + epsilon));
      });
  mean = m;
  rstd = rs;
}

FView layer_norm_apply(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                       const FView& mean, const FView& rstd, const FView& scale,
                       const FView& bias) {
  const char* where = "mtk::kernels::layer_norm_apply";
  const Rows r(where, shape, dim, x);
  r.check(where, mean, r.rows, "mean");
  r.check(where, rstd, r.rows, "rstd");
  r.check(where, scale, r.n, "scale");
  r.check(where, bias, r.n, "bias");
  FView y = impl::alloc<float>(where, shape.num_elements());
  const std::int64_t n = r.n, inner = r.inner;
  if (impl::device_paths()) {
    const RowOf at{n, inner};
    Kokkos::parallel_for(
        where, impl::Range(space, 0, shape.num_elements()), KOKKOS_LAMBDA(std::int64_t k) {
          const std::int64_t row = at.row(k), j = at.j(k);
          y(k) = (x(k) - mean(row)) * rstd(row) * scale(j) + bias(j);
        });
    return y;
  }
  Kokkos::parallel_for(
      where, impl::Range(space, 0, r.rows), KOKKOS_LAMBDA(std::int64_t row) {
        const std::int64_t base = (row / inner) * n * inner + row % inner;
        const float m = mean(row), s = rstd(row);
        for (std::int64_t j = 0; j < n; ++j) {
          const std::int64_t k = base + j * inner;
          y(k) = (x(k) - m) * s * scale(j) + bias(j);
        }
      });
  return y;
}

FView layer_norm_grad_sums(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                           const FView& mean, const FView& rstd, const FView& scale,
                           const FView& dy) {
  const char* where = "mtk::kernels::layer_norm_grad_sums";
  const Rows r(where, shape, dim, x);
  r.check(where, mean, r.rows, "mean");
  r.check(where, rstd, r.rows, "rstd");
  r.check(where, scale, r.n, "scale");
  r.check(where, dy, shape.num_elements(), "dy");
  const std::int64_t n = r.n, inner = r.inner, rows = r.rows;
  FView out = impl::alloc<float>(where, 2 * rows);
  const float *xp = x.data(), *dyp = dy.data(), *sp = scale.data();
  if (impl::device_paths()) {
    const FView a = Kokkos::subview(out, Kokkos::make_pair(std::int64_t(0), rows));
    const FView b = Kokkos::subview(out, Kokkos::make_pair(rows, 2 * rows));
    team_row_sums(
        space, where, rows, n, inner, a,
        KOKKOS_LAMBDA(std::int64_t, std::int64_t k, std::int64_t j) {
          return double(dyp[k] * sp[j]);
        });
    team_row_sums(
        space, where, rows, n, inner, b,
        KOKKOS_LAMBDA(std::int64_t row, std::int64_t k, std::int64_t j) {
          return double(dyp[k] * sp[j] * ((xp[k] - mean(row)) * rstd(row)));
        });
    return out;
  }
  Kokkos::parallel_for(
      where, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t row) {
        const std::int64_t base = (row / inner) * n * inner + row % inner;
        const float m = mean(row), s = rstd(row);
        const double a = row_sum(dyp, base, n, inner,
                                 [&](float g, std::int64_t j) { return double(g * sp[j]); });
        const double b = lane_sum(n, [&](std::int64_t j) {
          const std::int64_t k = base + j * inner;
          return double(dyp[k] * sp[j] * ((xp[k] - m) * s));
        });
        out(row) = static_cast<float>(a);
        out(rows + row) = static_cast<float>(b);
      });
  return out;
}

void layer_norm_grad_apply(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                           const FView& mean, const FView& rstd, const FView& scale,
                           const FView& dy, const FView& sums, std::int64_t d_total, FView& dx,
                           FView& dy_xhat) {
  const char* where = "mtk::kernels::layer_norm_grad_apply";
  const Rows r(where, shape, dim, x);
  r.check(where, mean, r.rows, "mean");
  r.check(where, rstd, r.rows, "rstd");
  r.check(where, scale, r.n, "scale");
  r.check(where, dy, shape.num_elements(), "dy");
  r.check(where, sums, 2 * r.rows, "row sums");
  const std::int64_t n = r.n, inner = r.inner, rows = r.rows;
  FView d = impl::alloc<float>("mtk::kernels::layer_norm_grad::dx", shape.num_elements());
  FView dh = impl::alloc<float>("mtk::kernels::layer_norm_grad::dy_xhat", shape.num_elements());
  const float inv_d = static_cast<float>(1.0 / static_cast<double>(d_total));
  if (impl::device_paths()) {
    const RowOf at{n, inner};
    Kokkos::parallel_for(
        where, impl::Range(space, 0, shape.num_elements()), KOKKOS_LAMBDA(std::int64_t k) {
          const std::int64_t row = at.row(k), j = at.j(k);
          const float s = rstd(row);
          const float a = sums(row) * inv_d, b = sums(rows + row) * inv_d;
          const float xh = (x(k) - mean(row)) * s, g = dy(k);
          d(k) = s * (g * scale(j) - a - xh * b);
          dh(k) = g * xh;
        });
    dx = d;  // after the kernel: dx or dy_xhat may be the caller's x or dy
    dy_xhat = dh;
    return;
  }
  Kokkos::parallel_for(
      where, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t row) {
        const std::int64_t base = (row / inner) * n * inner + row % inner;
        const float m = mean(row), s = rstd(row);
        const float a = sums(row) * inv_d, b = sums(rows + row) * inv_d;
        for (std::int64_t j = 0; j < n; ++j) {
          const std::int64_t k = base + j * inner;
          const float xh = (x(k) - m) * s, g = dy(k);
          d(k) = s * (g * scale(j) - a - xh * b);
          dh(k) = g * xh;
        }
      });
  dx = d;
  dy_xhat = dh;
}

}  // namespace mtk::kernels
