#pragma once
// mtk-layout calibrate: what the step model prices of a split halo exchange (calibrate.cpp).
// The model (cost/step_time.cpp) takes an exchange as its hand-over (LinkLevel::halo_sizes, by
// bytes) plus its finish step's packing and placing, 16 bytes per strip element at the finish
// kind's elementwise rate. Through shared memory (node_halo.hpp) the strips are packed straight
// into the sender's slot and placed from it, so they cross between cores inside those kernels:
// the rates are measured there, and the hand-over is only the publishing and the wait.

#include <mtk/base/exec_space.hpp>
#include <mtk/cost/machine.hpp>
#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/parallel/mesh.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::layout_app {

/// Floats per strip of the rates' measurement (measure_halo_steps): one position of a
/// convolution's block of 16^3 positions by 16 channels.
constexpr std::int64_t kHaloRateStrip = 16 * 256;

/// The finish kinds' rates (halo_exchange, halo_reduce) into m.elementwise_by_kind: strips of
/// kHaloRateStrip floats packed from a block (16 runs of 256 contiguous floats) and placed into
/// (folded into) a widened block, each exchange after 8 MiB written elsewhere (in a step the
/// block was written a layer before). Through `channel` (made for two such strips; every rank of
/// its node calls this together) the strips go into this rank's slot and come from the
/// neighbours'; without one, within this rank's memory.
void measure_halo_steps(const Communicator& world, const ExecSpace& space, int reps,
                        detail::NodeHaloChannel* channel, cost::Machine& m);

/// One periodic exchange along `axis` as a lowered exchange site hands it over: through the
/// site's shared-memory channel, publishing and waiting only (the strips stay in the slots); else
/// a HaloExchange of the four buffers through MPI.
void halo_hand_over(const Mesh& mesh, int axis, HaloSite& site, const Kokkos::View<float*>& to_left,
                    const Kokkos::View<float*>& to_right, const Kokkos::View<float*>& from_left,
                    const Kokkos::View<float*>& from_right);

}  // namespace mtk::layout_app
