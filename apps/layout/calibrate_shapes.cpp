// mtk-layout calibrate: skinny products and patch kernels; see calibrate_shapes.hpp.
#include "calibrate_shapes.hpp"

#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/patches.hpp>
#include <mtk/kernels/shape.hpp>

#include "calibrate_timing.hpp"
#include <algorithm>
#include <cstdint>
#include <vector>

namespace mtk::layout_app {

void measure_narrow_matmul(const Communicator& world, const ExecSpace& space, int reps,
                           cost::Machine& m) {
  const std::int64_t rows = 4096, wide = 256;
  auto rate = [&](std::int64_t d, bool inner) {
    const std::int64_t k = inner ? d : wide, n = inner ? wide : d;
    const Shape a{{"i", rows}, {"k", k}}, b{{"k", k}, {"j", n}}, y{{"i", rows}, {"j", n}};
    auto xa = kernels::fill<float>(space, rows * k, 1.0f);
    auto xb = kernels::fill<float>(space, k * n, 0.5f);
    const double each = 2.0 * static_cast<double>(rows * k * n);
    const int calls = std::max(1, static_cast<int>(2e8 / each));
    const double s = best_seconds(world, reps, [&] {
      for (int c = 0; c < calls; ++c)
        kernels::einsum(space, a, xa, b, xb, y);
    });
    return cost::NarrowMatmulPoint{static_cast<double>(d), each * calls / s};
  };
  for (std::int64_t d : {2, 8, 32, 128}) {
    m.matmul_narrow_outer.push_back(rate(d, false));
    m.matmul_narrow_inner.push_back(rate(d, true));
  }
}

void measure_patches(const Communicator& world, const ExecSpace& space, int reps,
                     cost::Machine& m) {
  const std::int64_t n = 16, c = 16, taps = 27;
  const Shape block{{"d", n}, {"h", n}, {"w", n}, {"c", c}};
  std::vector<kernels::PatchGeometry> axes;
  for (int dim = 0; dim < 3; ++dim)
    axes.push_back({dim, 3, 1, 1, 1, n});
  auto x = kernels::fill<float>(space, block.num_elements(), 1.0f);
  const auto patches = kernels::extract_patches<float>(space, block, x, axes, 0.0f);
  const double bytes = 4.0 * static_cast<double>(block.num_elements()) * (1 + taps);
  const int calls = 10;  // ~70 MB a run each way
  m.elementwise_by_kind[cost::KindKey::named("extract_patches")] =
      bytes * calls / best_seconds(world, reps, [&] {
        for (int k = 0; k < calls; ++k)
          kernels::extract_patches<float>(space, block, x, axes, 0.0f);
      });
  m.elementwise_by_kind[cost::KindKey::named("fold_patches")] =
      bytes * calls / best_seconds(world, reps, [&] {
        for (int k = 0; k < calls; ++k)
          kernels::fold_patches<float>(space, block, patches, axes);
      });
  // An attention operand's reorder: [1024, 16, 64] -> [16, 1024, 64], runs of 64 floats.
  const Shape operand{{"m", 1024}, {"h", 16}, {"d", 64}},
      reordered{{"h", 16}, {"m", 1024}, {"d", 64}};
  auto y = kernels::fill<float>(space, operand.num_elements(), 1.0f);
  m.elementwise_by_kind[cost::KindKey::einsum()] =
      8.0 * static_cast<double>(operand.num_elements()) * calls / best_seconds(world, reps, [&] {
        for (int k = 0; k < calls; ++k)
          kernels::transpose<float>(space, operand, y, reordered);
      });
}

}  // namespace mtk::layout_app
