// mtk::kernels fused softmax cross-entropy — see loss.hpp. One pass per statistic over the
// logits, no one-hot or probability tensor: the largest activations of a language model (logits
// [tokens, vocab]) are read a few times and written once (their gradient).

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/kernels.hpp>

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

}  // namespace detail::loss_impl

using detail::loss_impl::Rows;

FView sum_exp_shifted(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                      const FView& shift) {
  const Rows r(shape, dim);
  detail::loss_impl::check_rows("mtk::kernels::sum_exp_shifted", r,
                                static_cast<std::int64_t>(shift.extent(0)), "shift");
  FView out =
      impl::alloc<float>("mtk::kernels::sum_exp_shifted", static_cast<std::int64_t>(r.rows()));
  const std::int64_t V = r.v, inner = r.inner;
  Kokkos::parallel_for(
      "mtk::kernels::sum_exp_shifted", impl::Range(space, 0, r.rows()),
      KOKKOS_LAMBDA(std::int64_t row) {
        const std::int64_t o = row / inner, i = row % inner;
        const float m = shift(row);
        double s = 0;
        for (std::int64_t j = 0; j < V; ++j)
          s += ::expf(x((o * V + j) * inner + i) - m);
        out(row) = static_cast<float>(s);
      });
  return out;
}

void target_logit_and_sum(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                          const IView& targets, std::int64_t origin, FView& target_logit,
                          FView& logit_sum) {
  const Rows r(shape, dim);
  detail::loss_impl::check_rows("mtk::kernels::target_logit_and_sum", r,
                                static_cast<std::int64_t>(targets.extent(0)), "targets");
  FView xt = impl::alloc<float>("mtk::kernels::target_logit", static_cast<std::int64_t>(r.rows()));
  FView sx = impl::alloc<float>("mtk::kernels::logit_sum", static_cast<std::int64_t>(r.rows()));
  const std::int64_t V = r.v, inner = r.inner;
  Kokkos::parallel_for(
      "mtk::kernels::target_logit_and_sum", impl::Range(space, 0, r.rows()),
      KOKKOS_LAMBDA(std::int64_t row) {
        const std::int64_t o = row / inner, i = row % inner;
        const std::int64_t t = targets(row) - origin;
        double s = 0;
        for (std::int64_t j = 0; j < V; ++j)
          s += x((o * V + j) * inner + i);
        sx(row) = static_cast<float>(s);
        xt(row) = (t >= 0 && t < V) ? x((o * V + t) * inner + i) : 0.0f;
      });
  target_logit = xt;
  logit_sum = sx;
}

FView cross_entropy_from_stats(const ExecSpace& space, const FView& lse, const FView& target_logit,
                               const FView& logit_sum, double label_smoothing,
                               std::int64_t vocab_size, double z_loss) {
  const std::int64_t n = static_cast<std::int64_t>(lse.extent(0));
  if (static_cast<std::int64_t>(target_logit.extent(0)) != n ||
      static_cast<std::int64_t>(logit_sum.extent(0)) != n)
    fail("mtk::kernels::cross_entropy_from_stats", "row statistics differ in length");
  FView out = impl::alloc<float>("mtk::kernels::cross_entropy", static_cast<std::int64_t>(n));
  const float keep = static_cast<float>(1.0 - label_smoothing);
  const float spread = static_cast<float>(label_smoothing / static_cast<double>(vocab_size));
  const float z = static_cast<float>(z_loss);
  Kokkos::parallel_for(
      "mtk::kernels::cross_entropy_from_stats", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t k) {
        const float l = lse(k);
        out(k) = l - keep * target_logit(k) - spread * logit_sum(k) + z * l * l;
      });
  return out;
}

FView cross_entropy_grad(const ExecSpace& space, const Shape& shape, const FView& x, int dim,
                         const IView& targets, std::int64_t origin, const FView& lse,
                         const FView& dy, double label_smoothing, std::int64_t vocab_size,
                         double z_loss) {
  const Rows r(shape, dim);
  detail::loss_impl::check_rows("mtk::kernels::cross_entropy_grad", r,
                                static_cast<std::int64_t>(lse.extent(0)), "lse");
  detail::loss_impl::check_rows("mtk::kernels::cross_entropy_grad", r,
                                static_cast<std::int64_t>(dy.extent(0)), "dy");
  FView out = impl::alloc<float>("mtk::kernels::cross_entropy_grad",
                                 static_cast<std::int64_t>(x.extent(0)));
  const std::int64_t V = r.v, inner = r.inner;
  const float keep = static_cast<float>(1.0 - label_smoothing);
  const float spread = static_cast<float>(label_smoothing / static_cast<double>(vocab_size));
  const float z2 = static_cast<float>(2.0 * z_loss);
  if (inner == 1) {  // rows contiguous (the vocabulary is the last dim): no index division
    Kokkos::parallel_for(
        "mtk::kernels::cross_entropy_grad", impl::Range(space, 0, r.rows()),
        KOKKOS_LAMBDA(std::int64_t row) {
          const float l = lse(row), g = dy(row), scale = 1.0f + z2 * l;
          const std::int64_t t = targets(row) - origin, base = row * V;
          for (std::int64_t j = 0; j < V; ++j)
            out(base + j) = g * (::expf(x(base + j) - l) * scale - spread);
          if (t >= 0 && t < V)
            out(base + t) -= g * keep;
        });
    return out;
  }
  Kokkos::parallel_for(
      "mtk::kernels::cross_entropy_grad",
      impl::Range(space, 0, static_cast<std::int64_t>(x.extent(0))), KOKKOS_LAMBDA(std::int64_t k) {
        const std::int64_t i = k % inner, rest = k / inner, j = rest % V, o = rest / V;
        const std::int64_t row = o * inner + i;
        const float l = lse(row);
        const float p = ::expf(x(k) - l) * (1.0f + z2 * l);
        const float hot = (targets(row) - origin == j) ? keep : 0.0f;
        out(k) = dy(row) * (p - hot - spread);
      });
  return out;
}

}  // namespace mtk::kernels
