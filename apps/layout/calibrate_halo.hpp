#pragma once
// mtk-layout calibrate: what the step model prices of a split halo exchange (calibrate.cpp).
// The model (cost/step_time.cpp) takes an exchange as its hand-over (LinkLevel::halo_sizes, by
// bytes) plus its finish step's packing and placing, 16 bytes per strip element at the finish
// kind's elementwise rate. Through shared memory (node_halo.hpp) the strips are packed straight
// into the sender's slot and placed from it, so they cross between cores inside those steps,
// while the neighbours compute: the rates are measured on lowered exchanges as they run.

#include <mtk/base/exec_space.hpp>
#include <mtk/cost/machine.hpp>
#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/parallel/mesh.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::layout_app {

/// Floats per strip of the rates' measurement (measure_halo_steps): one position of a
/// convolution's block of 16^3 positions by 8 channels.
constexpr std::int64_t kHaloRateStrip = 8 * 256;

/// The finish kinds' rates (halo_exchange, halo_reduce) into m.elementwise_by_kind, from lowered
/// programs (every rank of the mesh calls this together): an exchange of strips of kHaloRateStrip
/// floats along `axis`, overlapped with a product that runs while the strips travel, its start and
/// finish steps timed as a step's are; less `hand_over_s` (the hand-over, halo_sizes) and the
/// finish's step overhead, the rest is priced by the finish's bytes (16 per strip element).
void measure_halo_steps(const Communicator& world, const Mesh& mesh, int axis, int reps,
                        double hand_over_s, cost::Machine& m);

/// One periodic exchange along `axis` as a lowered exchange site hands it over: through the
/// site's shared-memory channel, publishing and waiting only (the strips stay in the slots); else
/// a HaloExchange of the four buffers through MPI.
void halo_hand_over(const Mesh& mesh, int axis, HaloSite& site, const Kokkos::View<float*>& to_left,
                    const Kokkos::View<float*>& to_right, const Kokkos::View<float*>& from_left,
                    const Kokkos::View<float*>& from_right);

}  // namespace mtk::layout_app
