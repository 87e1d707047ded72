// Fused optimizer updates: each reads a parameter, its gradient and its slots once and writes the
// new values in the same pass (instead of a dozen elementwise ops).

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/optimizer.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace mtk::kernels {
namespace {

// An update's output: the view the caller passed when it holds n values (it may be an input: each
// value is read before it is written), else a new one.
FView output(const FView& given, const char* label, std::int64_t n) {
  if (static_cast<std::int64_t>(given.extent(0)) == n && given.data() != nullptr)
    return given;
  return impl::alloc<float>(label, n);
}

}  // namespace

void adam_update(const ExecSpace& space, const FView& p, const FView& m, const FView& v,
                 const FView& g, const FView& step_size, float beta1, float beta2, float epsilon,
                 FView& new_p, FView& new_m, FView& new_v) {
  const std::int64_t n = static_cast<std::int64_t>(p.extent(0));
  for (const FView* t : {&m, &v, &g})
    if (static_cast<std::int64_t>(t->extent(0)) != n)
      fail("mtk::kernels::adam_update",
           cat("'", t->label(), "' holds ", t->extent(0), " values, the parameter ", n));
  FView np = output(new_p, "mtk::kernels::adam_update::p", n),
        nm = output(new_m, "mtk::kernels::adam_update::m", n),
        nv = output(new_v, "mtk::kernels::adam_update::v", n);
  const float c1 = 1.0f - beta1, c2 = 1.0f - beta2;
  Kokkos::parallel_for(
      "mtk::kernels::adam_update", impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
        const float gk = g(k);
        const float mk = beta1 * m(k) + c1 * gk;
        const float vk = beta2 * v(k) + c2 * gk * gk;
        nm(k) = mk;
        nv(k) = vk;
        np(k) = p(k) - step_size(0) * mk / (::sqrtf(vk) + epsilon);
      });
  new_p = np;
  new_m = nm;
  new_v = nv;
}

namespace {

void check_same_size(const char* where, std::int64_t n, std::initializer_list<const FView*> views) {
  for (const FView* t : views)
    if (static_cast<std::int64_t>(t->extent(0)) != n)
      fail(where, cat("'", t->label(), "' holds ", t->extent(0), " values, the parameter ", n));
}

void check_scalar(const char* where, const FView& s) {
  if (s.extent(0) != 1)
    fail(where, cat("'", s.label(), "' holds ", s.extent(0), " values, not one"));
}

}  // namespace

void adafactor_second_moment(const ExecSpace& space, const FView& v, const FView& g,
                             const FView& decay, float epsilon1, FView& new_v, FView& update) {
  const char* where = "mtk::kernels::adafactor_second_moment";
  const std::int64_t n = static_cast<std::int64_t>(v.extent(0));
  check_same_size(where, n, {&g});
  check_scalar(where, decay);
  FView nv = output(new_v, "mtk::kernels::adafactor_second_moment::v", n),
        u = impl::alloc<float>("mtk::kernels::adafactor_second_moment::update", n);
  Kokkos::parallel_for(
      where, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
        const float d = decay(0), keep = -d + 1.0f, gk = g(k);
        const float vk = d * v(k) + keep * (gk * gk + epsilon1);
        nv(k) = vk;
        u(k) = gk * (1.0f / ::sqrtf(vk));
      });
  new_v = nv;
  update = u;
}

void adafactor_apply(const ExecSpace& space, const FView& p, const FView& m, const FView& update,
                     const FView& clip, const FView& scale, double beta1, FView& new_p,
                     FView& new_m) {
  const char* where = "mtk::kernels::adafactor_apply";
  const std::int64_t n = static_cast<std::int64_t>(p.extent(0));
  const bool momentum = beta1 > 0.0;
  check_same_size(where, n, {&update});
  if (momentum)
    check_same_size(where, n, {&m});
  check_scalar(where, clip);
  check_scalar(where, scale);
  FView np = output(new_p, "mtk::kernels::adafactor_apply::p", n);
  if (!momentum) {
    Kokkos::parallel_for(
        where, impl::Range(space, 0, n),
        KOKKOS_LAMBDA(std::int64_t k) { np(k) = p(k) - update(k) / clip(0) * scale(0); });
    new_p = np;
    new_m = FView();
    return;
  }
  FView nm = output(new_m, "mtk::kernels::adafactor_apply::m", n);
  const float b1 = static_cast<float>(beta1), c1 = static_cast<float>(1.0 - beta1);
  Kokkos::parallel_for(
      where, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
        const float mk = m(k) * b1 + update(k) / clip(0) * scale(0) * c1;
        nm(k) = mk;
        np(k) = p(k) - mk;
      });
  new_p = np;
  new_m = nm;
}

}  // namespace mtk::kernels
