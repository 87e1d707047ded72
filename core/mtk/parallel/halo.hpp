#pragma once
// Neighbour exchanges along one mesh axis (Cabana::Grid's halo pattern in one dimension): each
// processor sends one buffer to the processor before it and one to the processor after it along
// the axis, found by MPI_Cart_shift on the axis's Cartesian sub-communicator, with non-blocking
// sends and receives, or through shared memory where the axis's ranks share a node and a HaloSite
// is given (node_halo.hpp). What the buffers hold (packed strips of a tensor's blocks) is the
// caller's.

#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/mesh.hpp>

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <memory>
#include <vector>

namespace mtk {

/// This processor's neighbours along mesh axis `axis`, as ranks of mesh.axes_comm({axis}); -1
/// past either end of the axis unless `periodic` (then the axis is a ring).
struct Neighbours {
  int left = -1, right = -1;
};
Neighbours neighbours(const Mesh& mesh, int axis, bool periodic);

namespace detail {
class NodeHaloChannel;
}

/// What one exchange site (a lowered halo op) keeps from one exchange to the next: where every
/// rank of the axis shares a node, the shared-memory channel its exchanges take (node_halo.hpp),
/// made once it has exchanged kSharedMemoryAfter times through MPI (a collective over the axis;
/// tens of milliseconds with ranks sharing cores). Every exchange of a site has the same axis,
/// neighbours and sizes.
struct HaloSite {
  static constexpr int kSharedMemoryAfter = 8;
  /// Counts an exchange along `axis` (its neighbours as neighbours(mesh, axis, periodic)) that
  /// sends `to_left_bytes` and `to_right_bytes`: the site's channel, made at the
  /// kSharedMemoryAfter-th, or null (through MPI: not yet, across nodes, device memory).
  detail::NodeHaloChannel* shared_channel(const Mesh& mesh, int axis, bool periodic,
                                          std::size_t to_left_bytes, std::size_t to_right_bytes);

  std::shared_ptr<detail::NodeHaloChannel> channel;
  bool checked = false;
  int exchanges = 0;  // started, until the channel is made or not
};

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
               const Kokkos::View<T*>& from_right, HaloSite* site = nullptr);
  /// Whether both transfers completed (progresses them).
  bool test();
  /// Waits for both transfers and copies staged receive buffers back.
  void finish();

 private:
  using Host = typename Kokkos::View<T*>::HostMirror;
  std::vector<Kokkos::View<T*>> views_;  // to_left, to_right, from_left, from_right
  std::vector<Host> host_;               // MPI's copies where it cannot read the Views
  std::vector<Communicator::Request> requests_;
  std::shared_ptr<detail::NodeHaloChannel> channel_;  // shared memory, else MPI's requests
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
