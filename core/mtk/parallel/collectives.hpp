#pragma once
// Collectives over named mesh axes, on row-major tensor slices stored in flat Kokkos Views.
//
// Each function is collective over the processors that differ from this one only along the
// given mesh axes (Mesh::axes_comm). Buffers are handed to MPI directly when MPI can read the
// View's memory space (host memory, or device memory with MTK_ENABLE_CUDA_AWARE_MPI) and staged
// through a host mirror otherwise.

#include <mtk/base/shape.hpp>
#include <mtk/parallel/mesh.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <vector>

namespace mtk {

/// In place: every member of the group over `axes` ends with the elementwise reduction.
template <class T>
void allreduce(const Mesh& mesh, const std::vector<int>& axes, const Kokkos::View<T*>& data,
               ReduceOp op = ReduceOp::sum);

template <class T>
class AllreduceInFlight;

/// Starts allreduce(mesh, axes, data, op) without waiting for it: the same result, in place, once
/// AllreduceInFlight::finish() returns. Collective over the group, started in the same order on
/// every member.
template <class T>
AllreduceInFlight<T> start_allreduce(const Mesh& mesh, const std::vector<int>& axes,
                                     const Kokkos::View<T*>& data, ReduceOp op = ReduceOp::sum);

/// An in-place allreduce started by start_allreduce() and finished by finish(); in between, this
/// rank runs other work while MPI moves the data (progress() lets it move; MPICH has no progress
/// thread). The View must be neither read nor written until finish() returns. Holds the View, so
/// its memory outlives the transfer.
template <class T>
class AllreduceInFlight {
 public:
  AllreduceInFlight() = default;
  /// Progresses every collective in flight; true once this one completed.
  bool progress();
  /// Waits for completion (as collective_wait() says) and copies a staged result back.
  void finish();
  bool active() const { return request_.active() || staged_; }

 private:
  template <class U>
  friend AllreduceInFlight<U> start_allreduce(const Mesh&, const std::vector<int>&,
                                              const Kokkos::View<U*>&, ReduceOp);
  Communicator::Request request_;
  Kokkos::View<T*> data_;
  typename Kokkos::View<T*>::HostMirror host_;  // MPI's copy where it cannot read data_
  bool staged_ = false;
};

/// All-gather along tensor dim `dim` over mesh axis `axis` (Mesh-TF's allconcat): the result has
/// `local_shape[dim] * P` there, slices ordered by coordinate along `axis`.
template <class T>
Kokkos::View<T*> allconcat(const Mesh& mesh, int axis, const Shape& local_shape, int dim,
                           const Kokkos::View<T*>& local);

/// All-to-all over mesh axis `axis`: tensor dim `split_dim` (whole here) becomes split, tensor dim
/// `concat_dim` (split here) becomes whole. Result shape: split_dim / P, concat_dim * P.
template <class T>
Kokkos::View<T*> alltoall(const Mesh& mesh, int axis, const Shape& local_shape, int split_dim,
                          int concat_dim, const Kokkos::View<T*>& local);

/// Reduce-scatter over mesh axis `axis`: reduces over the group and leaves each member the part of
/// tensor dim `dim` at its coordinate (size local_shape[dim] / P).
template <class T>
Kokkos::View<T*> reduce_scatter(const Mesh& mesh, int axis, const Shape& local_shape, int dim,
                                const Kokkos::View<T*>& local, ReduceOp op = ReduceOp::sum);

/// In place along mesh axis `axis`: `data` holds P blocks, this member's own at its coordinate;
/// afterwards every block (MPI_Allgather with MPI_IN_PLACE): an allconcat along the outermost
/// dim into a buffer that already holds this member's part.
template <class T>
void allgather_in_place(const Mesh& mesh, int axis, const Kokkos::View<T*>& data);

template <class T>
class AllgatherInFlight;

/// Starts allgather_in_place(mesh, axis, data) without waiting for it (blocking where MPI cannot
/// read `data`'s memory): `data` must be neither read nor written until
/// AllgatherInFlight::finish() returns. Collective over the group, started in the same order on
/// every member.
template <class T>
AllgatherInFlight<T> start_allgather_in_place(const Mesh& mesh, int axis,
                                              const Kokkos::View<T*>& data);

/// An in-place allgather started by start_allgather_in_place(); holds the View, so its memory
/// outlives the transfer.
template <class T>
class AllgatherInFlight {
 public:
  AllgatherInFlight() = default;
  /// Progresses every collective in flight; true once this one completed.
  bool progress() { return request_.test(); }
  void finish() {
    request_.wait();
    data_ = Kokkos::View<T*>();
  }
  bool active() const { return request_.active(); }

 private:
  template <class U>
  friend AllgatherInFlight<U> start_allgather_in_place(const Mesh&, int, const Kokkos::View<U*>&);
  Communicator::Request request_;
  Kokkos::View<T*> data_;
};

template <class T>
class ReduceScatterInFlight;

/// Starts reduce_scatter(mesh, axis, local_shape, dim, local) without waiting for it, over
/// `local`'s own storage when `dim` is outermost (else over a packed copy): `local` must be
/// neither read nor written until ReduceScatterInFlight::finish() returns, and holds no whole
/// sum after it. Collective over the group, started in the same order on every member.
template <class T>
ReduceScatterInFlight<T> start_reduce_scatter(const Mesh& mesh, int axis, const Shape& local_shape,
                                              int dim, const Kokkos::View<T*>& local);

/// A reduce-scatter started by start_reduce_scatter(): progress() lets MPI move it, finish()
/// waits and returns this member's part (a View into the buffer it reduced in).
template <class T>
class ReduceScatterInFlight {
 public:
  ReduceScatterInFlight() = default;
  bool progress() { return request_.test(); }
  Kokkos::View<T*> finish();
  bool active() const { return request_.active() || data_.extent(0) > 0; }

 private:
  template <class U>
  friend ReduceScatterInFlight<U> start_reduce_scatter(const Mesh&, int, const Shape&, int,
                                                       const Kokkos::View<U*>&);
  Communicator::Request request_;
  Kokkos::View<T*> data_;  // the buffer reduced in; the result is elements [at_, at_ + count_)
  std::int64_t at_ = 0, count_ = 0;
};

/// In place: the member at position `root` of the group over `axes` sends its data to all others.
template <class T>
void broadcast(const Mesh& mesh, const std::vector<int>& axes, const Kokkos::View<T*>& data,
               int root = 0);

/// Along mesh axis `axis`, the processor at coordinate c receives the data of coordinate
/// c - offset. With `wrap` the axis is a ring; without it, coordinates with no source get zeros.
template <class T>
Kokkos::View<T*> shift(const Mesh& mesh, int axis, int offset, bool wrap,
                       const Kokkos::View<T*>& data);

/// Along mesh axis `axis`, the data at coordinate c moves to coordinate destination[c];
/// `destination` must be a permutation of 0..P-1.
template <class T>
Kokkos::View<T*> permute(const Mesh& mesh, int axis, const std::vector<int>& destination,
                         const Kokkos::View<T*>& data);

}  // namespace mtk
