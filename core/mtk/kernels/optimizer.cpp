// Fused optimizer updates: each reads a parameter, its gradient and its slots once and writes the
// new values in the same pass (instead of a dozen elementwise ops).

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/optimizer.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>

namespace mtk::kernels {

void adam_update(const ExecSpace& space, const FView& p, const FView& m, const FView& v,
                 const FView& g, const FView& step_size, float beta1, float beta2, float epsilon,
                 FView& new_p, FView& new_m, FView& new_v) {
  const std::int64_t n = static_cast<std::int64_t>(p.extent(0));
  for (const FView* t : {&m, &v, &g})
    if (static_cast<std::int64_t>(t->extent(0)) != n)
      fail("mtk::kernels::adam_update",
           cat("'", t->label(), "' holds ", t->extent(0), " values, the parameter ", n));
  FView np = impl::alloc<float>("mtk::kernels::adam_update::p", n),
        nm = impl::alloc<float>("mtk::kernels::adam_update::m", n),
        nv = impl::alloc<float>("mtk::kernels::adam_update::v", n);
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

}  // namespace mtk::kernels
