#include <mtk/base/error.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/parallel/node_halo.hpp>
#include <mtk/version.hpp>

#include <algorithm>
#include <cstdint>

namespace mtk {
namespace {

constexpr int kToRightTag = 811, kToLeftTag = 812;

template <class T>
constexpr bool mpi_reads_view =
    MTK_CUDA_AWARE_MPI != 0 ||
    Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                               typename Kokkos::View<T*>::memory_space>::accessible;

}  // namespace

Neighbours neighbours(const Mesh& mesh, int axis, bool periodic) {
  if (axis < 0 || axis >= mesh.ndims())
    fail("mtk::neighbours", cat("mesh axis ", axis, " outside mesh ", mesh.shape().to_string()));
  Neighbours nb;
  const int n = static_cast<int>(mesh.shape()[axis].size);
  if (n == 1) {
    if (periodic)
      nb.left = nb.right = 0;
    return nb;
  }
  // The mesh's communicator is periodic in every dim; a 1-D MPI_Cart_sub keeps that.
  const auto [source, dest] = mesh.axes_comm({axis}).cart_shift(0, 1);
  const int c = mesh.coordinate(axis);
  nb.left = periodic || c > 0 ? source : -1;
  nb.right = periodic || c + 1 < n ? dest : -1;
  return nb;
}

detail::NodeHaloChannel* HaloSite::shared_channel(const Mesh& mesh, int axis, bool periodic,
                                                  std::size_t to_left_bytes,
                                                  std::size_t to_right_bytes) {
  // Host memory only: a CUDA-aware MPI reads device buffers, which the slots' copies could not.
  if (MTK_CUDA_AWARE_MPI != 0 || !mpi_reads_view<char>)
    return nullptr;
  // Made at a site's kSharedMemoryAfter-th exchange (every rank of the axis comes there at
  // once): a program run a few times does not pay for the shared files (a collective each).
  if (!checked && exchanges++ == kSharedMemoryAfter) {
    if (const auto node = node_reducer_of(mesh.axes_comm({axis}))) {
      const Neighbours nb = neighbours(mesh, axis, periodic);
      channel =
          detail::NodeHaloChannel::create(node, nb.left, nb.right, to_left_bytes, to_right_bytes);
    }
    checked = true;
  }
  return channel.get();
}

template <class T>
HaloExchange<T>::HaloExchange(const Mesh& mesh, int axis, bool periodic,
                              const Kokkos::View<T*>& to_left, const Kokkos::View<T*>& to_right,
                              const Kokkos::View<T*>& from_left, const Kokkos::View<T*>& from_right,
                              HaloSite* site)
    : views_{to_left, to_right, from_left, from_right} {
  if (to_left.extent(0) != from_right.extent(0) || to_right.extent(0) != from_left.extent(0))
    fail("mtk::HaloExchange",
         cat("sends of ", to_left.extent(0), " and ", to_right.extent(0),
             " elements but receives of ", from_right.extent(0), " and ", from_left.extent(0)));
  Kokkos::Profiling::pushRegion("mtk::HaloExchange::start");
  const Neighbours nb = neighbours(mesh, axis, periodic);
  const Communicator& comm = mesh.axes_comm({axis});
  if (site != nullptr)
    if (site->shared_channel(mesh, axis, periodic, to_left.extent(0) * sizeof(T),
                             to_right.extent(0) * sizeof(T)) != nullptr) {
      Kokkos::fence();  // the kernels packing the sends are done
      channel_ = site->channel;
      channel_->post(to_left.data(), to_right.data());
      Kokkos::Profiling::popRegion();
      return;
    }
  std::vector<T*> data;
  if constexpr (mpi_reads_view<T>) {
    Kokkos::fence();  // the kernels packing the sends are done
    for (auto& v : views_)
      data.push_back(v.data());
  } else {
    for (size_t k = 0; k < views_.size(); ++k) {
      host_.push_back(Kokkos::create_mirror_view(views_[k]));
      Kokkos::deep_copy(host_[k], views_[k]);  // sends, and the fill of receives with no neighbour
      data.push_back(host_[k].data());
    }
  }
  // Rightward: my to_right into the right neighbour's from_left; leftward the other way.
  requests_.push_back(
      comm.start_sendrecv(data[1], nb.right, data[2], nb.left, to_right.extent(0), kToRightTag));
  requests_.push_back(
      comm.start_sendrecv(data[0], nb.left, data[3], nb.right, to_left.extent(0), kToLeftTag));
  Kokkos::Profiling::popRegion();
}

template <class T>
bool HaloExchange<T>::test() {
  if (channel_)
    return channel_->arrived();
  bool done = true;
  for (auto& r : requests_)
    done = r.test() && done;
  return done;
}

template <class T>
void HaloExchange<T>::finish() {
  Kokkos::Profiling::pushRegion("mtk::HaloExchange::finish");
  if (channel_) {
    channel_->receive(views_[2].data(), views_[3].data());
    channel_.reset();
  }
  for (auto& r : requests_)
    r.wait();
  requests_.clear();
  if (!host_.empty()) {
    Kokkos::deep_copy(views_[2], host_[2]);
    Kokkos::deep_copy(views_[3], host_[3]);
  }
  host_.clear();
  views_.clear();
  Kokkos::Profiling::popRegion();
}

void HalosInFlight::remove(HaloExchange<float>* h) {
  flights_.erase(std::remove(flights_.begin(), flights_.end(), h), flights_.end());
}

void HalosInFlight::progress() {
  for (HaloExchange<float>* h : flights_)
    h->test();
}

template class HaloExchange<float>;
template class HaloExchange<double>;

}  // namespace mtk
