// mtk-layout calibrate: split halo exchanges — see calibrate_halo.hpp.
#include "calibrate_halo.hpp"

#include <mtk/lower/lowering.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/parallel/node_halo.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace mtk::layout_app {

namespace {

// Seconds per run of the start and finish steps of one lowered exchange along `axis` (periodic,
// strips of kHaloRateStrip floats: a [P, 16, strip] tensor split in blocks), forward or its
// adjoint, with program.overlap_halo on and a product of ~33 MFLOP between its start and its
// finish: the program's own packing, publishing and placing while the neighbours compute, the waits
// hidden. The median over `reps` rounds of the most over the ranks.
double exchange_steps_seconds(const Communicator& world, const Mesh& mesh, int axis, bool adjoint,
                              int reps) {
  const std::int64_t P = mesh.shape()[axis].size, n = 16, strip = kHaloRateStrip, k = 256;
  ProgramOptions overlapped;
  overlapped.overlap_halo = true;  // the exchange split into its start and finish steps
  Graph g(overlapped);
  const Tensor x = placeholder(g, "x", Shape({{"b", P}, {"n", adjoint ? n + 2 : n}, {"i", strip}}));
  const Tensor xs = x + x;  // computed by a step, as in a layer (and not timed with the feeds)
  const Tensor y = adjoint ? halo_reduce(xs, "b", "n", 1, 1, HaloBoundary::periodic)
                           : halo_exchange(xs, "b", "n", 1, 1, HaloBoundary::periodic);
  const Tensor a = placeholder(g, "a", Shape({{"r", k}, {"k", k}}));
  const Tensor c = placeholder(g, "c", Shape({{"k", k}, {"s", k}}));
  const Tensor w = einsum({a, c}, Shape({{"r", k}, {"s", k}}));  // independent of the exchange
  const Tensor loss = reduce_sum(y) + reduce_sum(w);
  auto program = lower(g, mesh, LayoutRules::parse("b:" + mesh.shape()[axis].name));
  std::map<int, HostTensor> feeds;
  for (const Tensor& t : {x, a, c})
    feeds.emplace(t.id(), HostTensor::floats(
                              t.shape(), std::vector<float>(
                                             static_cast<size_t>(t.shape().num_elements()), 0.5f)));
  const int runs = 10;
  for (int i = 0; i <= HaloSite::kSharedMemoryAfter; ++i)  // the sites' shared channels made
    program->run(feeds, {loss});
  std::vector<double> per_run;
  for (int r = 0; r < std::max(reps, 3); ++r) {
    program->set_profiling(true);
    program->reset_time_split();
    for (int i = 0; i < runs; ++i)
      program->run(feeds, {loss});
    program->set_profiling(false);
    double s = 0;
    for (const auto& [kind, sec] : program->time_by_kind())
      if (kind == "halo_start" || kind == (adjoint ? "halo_reduce" : "halo_exchange"))
        s += sec;
    per_run.push_back(world.max(s) / runs);
  }
  std::sort(per_run.begin(), per_run.end());
  return per_run[per_run.size() / 2];
}

}  // namespace

void measure_halo_steps(const Communicator& world, const Mesh& mesh, int axis, int reps,
                        double hand_over_s, cost::Machine& m) {
  const double bytes = 16.0 * 2 * static_cast<double>(kHaloRateStrip);  // the finish's count
  for (const bool adjoint : {false, true}) {
    const double s = exchange_steps_seconds(world, mesh, axis, adjoint, reps);
    // What the model adds to the rate's time: the hand-over and the finish's step overhead.
    const double own = std::max(s - hand_over_s - m.op_overhead_s, 0.1 * s);
    m.elementwise_by_kind[cost::KindKey::named(adjoint ? "halo_reduce" : "halo_exchange")] =
        bytes / own;
  }
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
