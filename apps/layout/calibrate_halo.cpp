// mtk-layout calibrate: split halo exchanges — see calibrate_halo.hpp.
#include "calibrate_halo.hpp"

#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/halo.hpp>
#include <mtk/parallel/node_halo.hpp>

#include <algorithm>
#include <chrono>
#include <functional>

namespace mtk::layout_app {

void measure_halo_steps(const Communicator& world, const ExecSpace& space, int reps,
                        detail::NodeHaloChannel* channel, cost::Machine& m) {
  using kernels::FView;
  const std::int64_t strip = kHaloRateStrip;
  const Shape block{{"o", 16}, {"b", 1}, {"n", 16}, {"i", strip / 16}};
  const Shape wide{{"o", 16}, {"b", 1}, {"n", 18}, {"i", strip / 16}};
  auto x = kernels::fill<float>(space, block.num_elements(), 1.0f);
  auto y = kernels::fill<float>(space, wide.num_elements(), 2.0f);
  auto out = kernels::fill<float>(space, block.num_elements(), 0.0f);
  const FView own_left = kernels::fill<float>(space, strip, 3.0f);
  const FView own_right = kernels::fill<float>(space, strip, 4.0f);
  auto flush = kernels::fill<float>(space, std::int64_t(1) << 21, 0.0f);
  const int calls = 100;
  using Clock = std::chrono::steady_clock;
  // pack(x or y, to_left, to_right), then place(from_left, from_right): their time, not the
  // hand-over's.
  auto rate = [&](const std::function<void(const FView&, const FView&)>& pack,
                  const std::function<void(const FView&, const FView&)>& place) {
    double best = 1e300;
    for (int r = 0; r <= reps; ++r) {  // the first a warm-up
      double s = 0;
      for (int i = 0; i < calls; ++i) {
        Kokkos::deep_copy(space, flush, static_cast<float>(i));
        space.fence();
        auto t0 = Clock::now();
        FView to_left = own_left, to_right = own_right;
        if (channel != nullptr) {
          const auto slot = channel->slots();
          to_left = FView(static_cast<float*>(slot.to_left), strip);
          to_right = FView(static_cast<float*>(slot.to_right), strip);
        }
        pack(to_left, to_right);
        space.fence();
        s += std::chrono::duration<double>(Clock::now() - t0).count();
        FView from_left = own_left, from_right = own_right;
        if (channel != nullptr) {
          channel->publish();
          const auto got = channel->received();
          from_left = FView(const_cast<float*>(static_cast<const float*>(got.from_left)), strip);
          from_right = FView(const_cast<float*>(static_cast<const float*>(got.from_right)), strip);
        }
        t0 = Clock::now();
        place(from_left, from_right);
        space.fence();
        s += std::chrono::duration<double>(Clock::now() - t0).count();
        if (channel != nullptr)
          channel->release();
      }
      if (r > 0)
        best = std::min(best, world.max(s));
    }
    return 16.0 * 2 * static_cast<double>(strip) * calls / best;
  };
  m.elementwise_by_kind["halo_exchange"] = rate(
      [&](const FView& l, const FView& r) {
        kernels::halo_strip_into(space, block, x, 1, 2, 0, 0, 1, l);
        kernels::halo_strip_into(space, block, x, 1, 2, 0, 15, 1, r);
      },
      [&](const FView& l, const FView& r) {
        kernels::halo_place(space, wide, y, 1, 2, l, r, 1, 1);
      });
  m.elementwise_by_kind["halo_reduce"] = rate(
      [&](const FView& l, const FView& r) {
        kernels::halo_strip_into(space, wide, y, 1, 2, 0, 0, 1, l);
        kernels::halo_strip_into(space, wide, y, 1, 2, 0, 17, 1, r);
      },
      [&](const FView& l, const FView& r) {
        kernels::halo_fold_edges(space, wide, y, 1, 2, l, r, 1, 1, out);
      });
}

void halo_hand_over(const Mesh& mesh, int axis, HaloSite& site, const Kokkos::View<float*>& to_left,
                    const Kokkos::View<float*>& to_right, const Kokkos::View<float*>& from_left,
                    const Kokkos::View<float*>& from_right) {
  if (detail::NodeHaloChannel* channel =
          site.shared_channel(mesh, axis, true, to_left.extent(0) * sizeof(float),
                              to_right.extent(0) * sizeof(float))) {
    channel->slots();
    channel->publish();
    channel->received();
    channel->release();
    return;
  }
  HaloExchange<float>(mesh, axis, true, to_left, to_right, from_left, from_right).finish();
}

}  // namespace mtk::layout_app
