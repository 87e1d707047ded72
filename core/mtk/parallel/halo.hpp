#pragma once
// Neighbour exchanges along one mesh axis (Cabana::Grid's halo pattern in one dimension): each
// processor sends one buffer to the processor before it and one to the processor after it along
// the axis, found by MPI_Cart_shift on the axis's Cartesian sub-communicator, with non-blocking
// sends and receives. What the buffers hold (packed strips of a tensor's blocks) is the caller's.

#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/mesh.hpp>

#include <Kokkos_Core.hpp>

#include <vector>

namespace mtk {

/// This processor's neighbours along mesh axis `axis`, as ranks of mesh.axes_comm({axis}); -1
/// past either end of the axis unless `periodic` (then the axis is a ring).
struct Neighbours {
  int left = -1, right = -1;
};
Neighbours neighbours(const Mesh& mesh, int axis, bool periodic);

/// A neighbour exchange in flight along one mesh axis. `to_left` goes to the left neighbour, where
/// it arrives in `from_right`; `to_right` goes to the right neighbour's `from_left`. A receive
/// buffer with no neighbour is left as it is (the caller fills it). The buffers must be neither
/// read nor written until finish() returns; the exchange holds them. Point to point: ranks of a
/// group may start their exchanges at different times.
template <class T>
class HaloExchange {
 public:
  HaloExchange() = default;
  HaloExchange(const Mesh& mesh, int axis, bool periodic, const Kokkos::View<T*>& to_left,
               const Kokkos::View<T*>& to_right, const Kokkos::View<T*>& from_left,
               const Kokkos::View<T*>& from_right);
  /// Whether both transfers completed (progresses them).
  bool test();
  /// Waits for both transfers and copies staged receive buffers back.
  void finish();

 private:
  using Host = typename Kokkos::View<T*>::HostMirror;
  std::vector<Kokkos::View<T*>> views_;  // to_left, to_right, from_left, from_right
  std::vector<Host> host_;               // MPI's copies where it cannot read the Views
  std::vector<Communicator::Request> requests_;
};

/// The neighbour exchanges of a program in flight, for MPI_Test between its steps: a strip above
/// MPI's eager limit moves only while its ranks are inside MPI, so without this an overlapped
/// exchange would move nothing until its finish waits.
class HalosInFlight {
 public:
  void add(HaloExchange<float>* h) { flights_.push_back(h); }
  /// Before `h` finishes (or is dropped).
  void remove(HaloExchange<float>* h);
  bool in_flight() const { return !flights_.empty(); }
  /// Tests every exchange in flight; one that completed stays until its finish removes it.
  void progress();

 private:
  std::vector<HaloExchange<float>*> flights_;
};

}  // namespace mtk
