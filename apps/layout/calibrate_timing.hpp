#pragma once
// mtk-layout calibrate: how every measurement is timed (calibrate.cpp, calibrate_shapes.cpp).

#include <mtk/parallel/communicator.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <functional>

namespace mtk::layout_app {

/// Best (smallest) seconds of `reps` runs of `fn` after one warm-up, all ranks starting together;
/// the slowest rank counts.
inline double best_seconds(const Communicator& comm, int reps, const std::function<void()>& fn) {
  fn();  // warm-up
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    Kokkos::fence();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, comm.max(s));
  }
  return best;
}

}  // namespace mtk::layout_app
