#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/version.hpp>

#include <mpi.h>

namespace mtk {
namespace {

// What MPI reads and writes for a View: the View itself when MPI can reach its memory (a host
// memory space, or device memory with a CUDA-aware MPI: MTK_CUDA_AWARE_MPI), otherwise a host
// mirror that is filled before and copied back after MPI touches it.
template <class T>
struct MpiStage {
  static constexpr bool direct =
      MTK_CUDA_AWARE_MPI != 0 ||
      Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                                 typename Kokkos::View<T*>::memory_space>::accessible;
  Kokkos::View<T*> device;
  typename Kokkos::View<T*>::HostMirror host;
  MpiStage(const Kokkos::View<T*>& v, bool fill) : device(v) {
    if constexpr (direct) {
      Kokkos::fence();  // the kernels writing `v`, on any instance, are done
    } else {
      host = Kokkos::create_mirror_view(v);
      if (fill)
        Kokkos::deep_copy(host, device);
    }
  }
  void write_back() {
    if constexpr (!direct)
      Kokkos::deep_copy(device, host);
  }
  T* data() { return direct ? device.data() : host.data(); }
};

void check_dim(const char* where, const Shape& s, int dim) {
  if (dim < 0 || dim >= s.rank())
    fail(where, cat("tensor dim ", dim, " outside ", s.to_string()));
}

template <class T>
void check_size(const char* where, const Shape& s, const Kokkos::View<T*>& v) {
  if (static_cast<std::int64_t>(v.extent(0)) != s.num_elements())
    fail(where, cat("buffer '", v.label(), "' holds ", v.extent(0), " elements but shape ",
                    s.to_string(), " has ", s.num_elements()));
}

}  // namespace

namespace detail {

// Both layouts hold, per (chunk p, outer index o), one contiguous run of m * inner values: a
// copy of parts * outer runs. Indexed by (run, position) rather than by flat element, so the
// divisions are per run, not per value (they cost more than the copy itself on CPUs).
using RunPolicy = Kokkos::MDRangePolicy<Kokkos::Rank<2>, Kokkos::IndexType<std::int64_t>>;

// out[p][o][j][i] = in[o][p*m + j][i] with m = n / parts: chunk p of dim `dim` moved to the front.
template <class T>
Kokkos::View<T*> split_to_chunks(const char* label, const Kokkos::View<T*>& in, Around a,
                                 std::int64_t parts) {
  Kokkos::View<T*> out = uninitialized_view<T>(label, static_cast<std::int64_t>(in.extent(0)));
  const std::int64_t m = a.n / parts, outer = a.outer, n = a.n, inner = a.inner;
  const std::int64_t run = m * inner;
  if (run == 0 || parts * outer == 0)
    return out;
  Kokkos::parallel_for(
      label, RunPolicy({0, 0}, {parts * outer, run}),
      KOKKOS_LAMBDA(std::int64_t r, std::int64_t e) {
        const std::int64_t p = r / outer, o = r % outer;
        out(r * run + e) = in((o * n + p * m) * inner + e);
      });
  return out;
}

// Inverse: out[o][p*m + j][i] = in[p][o][j][i], chunks concatenated along the dim.
template <class T>
Kokkos::View<T*> chunks_to_concat(const char* label, const Kokkos::View<T*>& in, Around chunk,
                                  std::int64_t parts) {
  Kokkos::View<T*> out = uninitialized_view<T>(label, static_cast<std::int64_t>(in.extent(0)));
  const std::int64_t m = chunk.n, outer = chunk.outer, inner = chunk.inner, n = m * parts;
  const std::int64_t run = m * inner;
  if (run == 0 || parts * outer == 0)
    return out;
  Kokkos::parallel_for(
      label, RunPolicy({0, 0}, {parts * outer, run}),
      KOKKOS_LAMBDA(std::int64_t r, std::int64_t e) {
        const std::int64_t p = r / outer, o = r % outer;
        out((o * n + p * m) * inner + e) = in(r * run + e);
      });
  return out;
}

}  // namespace detail

namespace {

std::int64_t axis_size(const Mesh& mesh, int axis, const char* where) {
  if (axis < 0 || axis >= mesh.ndims())
    fail(where, cat("mesh axis ", axis, " outside mesh ", mesh.shape().to_string()));
  return mesh.shape()[axis].size;
}

}  // namespace

template <class T>
void allreduce(const Mesh& mesh, const std::vector<int>& axes, const Kokkos::View<T*>& data,
               ReduceOp op) {
  Kokkos::Profiling::pushRegion("mtk::allreduce");
  const Communicator& comm = mesh.axes_comm(axes);
  if (mesh.group_size(axes) > 1) {
    MpiStage<T> stage(data, true);
    comm.allreduce_in_place(stage.data(), data.extent(0), op);
    stage.write_back();
  }
  Kokkos::Profiling::popRegion();
}

template <class T>
AllreduceInFlight<T> start_allreduce(const Mesh& mesh, const std::vector<int>& axes,
                                     const Kokkos::View<T*>& data, ReduceOp op) {
  AllreduceInFlight<T> f;
  if (mesh.group_size(axes) <= 1)
    return f;
  Kokkos::Profiling::pushRegion("mtk::start_allreduce");
  f.data_ = data;
  T* buffer = data.data();
  if constexpr (MpiStage<T>::direct) {
    Kokkos::fence();  // the kernels writing `data` are done
  } else {
    f.host_ = Kokkos::create_mirror_view(data);
    Kokkos::deep_copy(f.host_, data);
    buffer = f.host_.data();
    f.staged_ = true;
  }
  f.request_ = mesh.axes_comm(axes).start_allreduce_in_place(buffer, data.extent(0), op);
  Kokkos::Profiling::popRegion();
  return f;
}

template <class T>
bool AllreduceInFlight<T>::progress() {
  return request_.test();
}

template <class T>
void AllreduceInFlight<T>::finish() {
  request_.wait();
  if (staged_)
    Kokkos::deep_copy(data_, host_);
  staged_ = false;
  data_ = Kokkos::View<T*>();
  host_ = typename Kokkos::View<T*>::HostMirror();
}

template <class T>
Kokkos::View<T*> allconcat(const Mesh& mesh, int axis, const Shape& local_shape, int dim,
                           const Kokkos::View<T*>& local) {
  const char* where = "mtk::allconcat";
  check_dim(where, local_shape, dim);
  check_size(where, local_shape, local);
  const std::int64_t parts = axis_size(mesh, axis, where);
  Kokkos::Profiling::pushRegion(where);
  Kokkos::View<T*> gathered = uninitialized_view<T>(
      "mtk::allconcat::gathered", static_cast<std::int64_t>(local.extent(0) * parts));
  {
    MpiStage<T> send(local, true), recv(gathered, false);
    mesh.axes_comm({axis}).allgather_into(send.data(), recv.data(), local.extent(0));
    recv.write_back();
  }
  // Chunks along the outermost dims are already in place: no unpacking copy.
  const Around around(local_shape, dim);
  auto out = around.outer == 1
                 ? gathered
                 : detail::chunks_to_concat("mtk::allconcat::unpack", gathered, around, parts);
  Kokkos::Profiling::popRegion();
  return out;
}

template <class T>
Kokkos::View<T*> alltoall(const Mesh& mesh, int axis, const Shape& local_shape, int split_dim,
                          int concat_dim, const Kokkos::View<T*>& local) {
  const char* where = "mtk::alltoall";
  check_dim(where, local_shape, split_dim);
  check_dim(where, local_shape, concat_dim);
  check_size(where, local_shape, local);
  if (split_dim == concat_dim)
    fail(where, cat("split and concat dim are both '", local_shape[split_dim].name, "'"));
  const std::int64_t parts = axis_size(mesh, axis, where);
  if (local_shape[split_dim].size % parts != 0)
    fail(where,
         cat("dimension '", local_shape[split_dim].name, "' of size ", local_shape[split_dim].size,
             " in ", local_shape.to_string(), " is not divisible by mesh dimension '",
             mesh.shape()[axis].name, "' of size ", parts));
  Kokkos::Profiling::pushRegion(where);
  auto send =
      detail::split_to_chunks("mtk::alltoall::pack", local, Around(local_shape, split_dim), parts);
  Kokkos::View<T*> received =
      uninitialized_view<T>("mtk::alltoall::received", static_cast<std::int64_t>(local.extent(0)));
  {
    MpiStage<T> s(send, true), r(received, false);
    mesh.axes_comm({axis}).alltoall_into(s.data(), r.data(),
                                         local.extent(0) / static_cast<size_t>(parts));
    r.write_back();
  }
  send = Kokkos::View<T*>();
  std::vector<Dimension> chunk_dims = local_shape.dims();
  chunk_dims[static_cast<size_t>(split_dim)].size /= parts;
  auto out = detail::chunks_to_concat("mtk::alltoall::unpack", received,
                                      Around(Shape(chunk_dims), concat_dim), parts);
  Kokkos::Profiling::popRegion();
  return out;
}

template <class T>
Kokkos::View<T*> reduce_scatter(const Mesh& mesh, int axis, const Shape& local_shape, int dim,
                                const Kokkos::View<T*>& local, ReduceOp op) {
  const char* where = "mtk::reduce_scatter";
  check_dim(where, local_shape, dim);
  check_size(where, local_shape, local);
  const std::int64_t parts = axis_size(mesh, axis, where);
  if (local_shape[dim].size % parts != 0)
    fail(where, cat("dimension '", local_shape[dim].name, "' of size ", local_shape[dim].size,
                    " is not divisible by mesh dimension '", mesh.shape()[axis].name, "' of size ",
                    parts));
  Kokkos::Profiling::pushRegion(where);
  const Around around(local_shape, dim);  // outermost: the chunks are contiguous already
  auto send = around.outer == 1
                  ? local
                  : detail::split_to_chunks("mtk::reduce_scatter::pack", local, around, parts);
  const std::int64_t count = static_cast<std::int64_t>(local.extent(0)) / parts;
  Kokkos::View<T*> out = uninitialized_view<T>("mtk::reduce_scatter", count);
  {
    MpiStage<T> s(send, true), r(out, false);
    mesh.axes_comm({axis}).reduce_scatter_into(s.data(), r.data(), static_cast<size_t>(count), op);
    r.write_back();
  }
  Kokkos::Profiling::popRegion();
  return out;
}

template <class T>
void allgather_in_place(const Mesh& mesh, int axis, const Kokkos::View<T*>& data) {
  const std::int64_t parts = axis_size(mesh, axis, "mtk::allgather_in_place");
  if (parts == 1)
    return;
  Kokkos::Profiling::pushRegion("mtk::allgather_in_place");
  MpiStage<T> stage(data, true);
  // MPI_IN_PLACE goes to MPI_Allgather as the send buffer.
  mesh.axes_comm({axis}).allgather_into(static_cast<const T*>(MPI_IN_PLACE), stage.data(),
                                        static_cast<std::size_t>(data.extent(0) / parts));
  stage.write_back();
  Kokkos::Profiling::popRegion();
}

template <class T>
AllgatherInFlight<T> start_allgather_in_place(const Mesh& mesh, int axis,
                                              const Kokkos::View<T*>& data) {
  AllgatherInFlight<T> f;
  const std::int64_t parts = axis_size(mesh, axis, "mtk::start_allgather_in_place");
  if (parts == 1 || !MpiStage<T>::direct) {  // nothing to move, or staged: blocking
    allgather_in_place(mesh, axis, data);
    return f;
  }
  Kokkos::Profiling::pushRegion("mtk::start_allgather_in_place");
  Kokkos::fence();  // the kernels writing it are done
  f.data_ = data;
  f.request_ = mesh.axes_comm({axis}).start_allgather_in_place(
      data.data(), static_cast<std::size_t>(data.extent(0) / parts));
  Kokkos::Profiling::popRegion();
  return f;
}

template <class T>
ReduceScatterInFlight<T> start_reduce_scatter(const Mesh& mesh, int axis, const Shape& local_shape,
                                              int dim, const Kokkos::View<T*>& local) {
  const char* where = "mtk::start_reduce_scatter";
  check_dim(where, local_shape, dim);
  check_size(where, local_shape, local);
  const std::int64_t parts = axis_size(mesh, axis, where);
  ReduceScatterInFlight<T> f;
  f.count_ = static_cast<std::int64_t>(local.extent(0)) / parts;
  if (parts == 1 || !MpiStage<T>::direct) {  // nothing to move, or staged: blocking
    f.data_ = reduce_scatter(mesh, axis, local_shape, dim, local);
    return f;
  }
  if (local_shape[dim].size % parts != 0)
    fail(where, cat("dimension '", local_shape[dim].name, "' of size ", local_shape[dim].size,
                    " is not divisible by mesh dimension '", mesh.shape()[axis].name, "' of size ",
                    parts));
  Kokkos::Profiling::pushRegion(where);
  const Around around(local_shape, dim);
  f.data_ = around.outer == 1
                ? local
                : detail::split_to_chunks("mtk::reduce_scatter::pack", local, around, parts);
  Kokkos::fence();  // the kernels writing it are done
  std::size_t at = 0;
  f.request_ = mesh.axes_comm({axis}).start_reduce_scatter_in_place(
      f.data_.data(), static_cast<std::size_t>(f.count_), ReduceOp::sum, &at);
  f.at_ = static_cast<std::int64_t>(at);
  Kokkos::Profiling::popRegion();
  return f;
}

template <class T>
Kokkos::View<T*> ReduceScatterInFlight<T>::finish() {
  request_.wait();
  Kokkos::View<T*> out = Kokkos::subview(data_, std::make_pair(at_, at_ + count_));
  data_ = Kokkos::View<T*>();
  return out;
}

template <class T>
void broadcast(const Mesh& mesh, const std::vector<int>& axes, const Kokkos::View<T*>& data,
               int root) {
  const int n = mesh.group_size(axes);
  if (root < 0 || root >= n)
    fail("mtk::broadcast", cat("root ", root, " outside a group of ", n, " processors"));
  if (n == 1)
    return;
  Kokkos::Profiling::pushRegion("mtk::broadcast");
  MpiStage<T> stage(data, true);
  mesh.axes_comm(axes).broadcast_in_place(stage.data(), data.extent(0), root);
  stage.write_back();
  Kokkos::Profiling::popRegion();
}

namespace {

// Each member sends `data` to position dest and receives from position source (-1: none, zeros).
template <class T>
Kokkos::View<T*> exchange(const Mesh& mesh, int axis, int dest, int source,
                          const Kokkos::View<T*>& data, const char* label) {
  Kokkos::View<T*> out(std::string(label), data.extent(0));  // zero-initialised: no source
  MpiStage<T> s(data, true), r(out, false);
  mesh.axes_comm({axis}).sendrecv(s.data(), dest, r.data(), source, data.extent(0));
  r.write_back();
  return out;
}

}  // namespace

template <class T>
Kokkos::View<T*> shift(const Mesh& mesh, int axis, int offset, bool wrap,
                       const Kokkos::View<T*>& data) {
  const int n = static_cast<int>(axis_size(mesh, axis, "mtk::shift"));
  const int c = mesh.coordinate(axis);
  int dest = c + offset, source = c - offset;
  if (wrap) {
    dest = ((dest % n) + n) % n;
    source = ((source % n) + n) % n;
  } else {
    if (dest < 0 || dest >= n)
      dest = -1;
    if (source < 0 || source >= n)
      source = -1;
  }
  Kokkos::Profiling::pushRegion("mtk::shift");
  auto out = exchange(mesh, axis, dest, source, data, "mtk::shift");
  Kokkos::Profiling::popRegion();
  return out;
}

template <class T>
Kokkos::View<T*> permute(const Mesh& mesh, int axis, const std::vector<int>& destination,
                         const Kokkos::View<T*>& data) {
  const int n = static_cast<int>(axis_size(mesh, axis, "mtk::permute"));
  std::vector<int> source(static_cast<size_t>(n), -1);
  if (static_cast<int>(destination.size()) != n)
    fail("mtk::permute", cat(destination.size(), " destinations for mesh dimension '",
                             mesh.shape()[axis].name, "' of size ", n));
  for (int i = 0; i < n; ++i) {
    int d = destination[static_cast<size_t>(i)];
    if (d < 0 || d >= n || source[static_cast<size_t>(d)] >= 0)
      fail("mtk::permute", cat("destinations are not a permutation of 0..", n - 1));
    source[static_cast<size_t>(d)] = i;
  }
  const int c = mesh.coordinate(axis);
  Kokkos::Profiling::pushRegion("mtk::permute");
  auto out = exchange(mesh, axis, destination[static_cast<size_t>(c)],
                      source[static_cast<size_t>(c)], data, "mtk::permute");
  Kokkos::Profiling::popRegion();
  return out;
}

#define MTK_INSTANTIATE_COLLECTIVES(T)                                                            \
  template class AllreduceInFlight<T>;                                                            \
  template AllreduceInFlight<T> start_allreduce<T>(const Mesh&, const std::vector<int>&,          \
                                                   const Kokkos::View<T*>&, ReduceOp);            \
  template void allreduce<T>(const Mesh&, const std::vector<int>&, const Kokkos::View<T*>&,       \
                             ReduceOp);                                                           \
  template Kokkos::View<T*> allconcat<T>(const Mesh&, int, const Shape&, int,                     \
                                         const Kokkos::View<T*>&);                                \
  template Kokkos::View<T*> alltoall<T>(const Mesh&, int, const Shape&, int, int,                 \
                                        const Kokkos::View<T*>&);                                 \
  template Kokkos::View<T*> reduce_scatter<T>(const Mesh&, int, const Shape&, int,                \
                                              const Kokkos::View<T*>&, ReduceOp);                 \
  template ReduceScatterInFlight<T> start_reduce_scatter<T>(const Mesh&, int, const Shape&, int,  \
                                                            const Kokkos::View<T*>&);             \
  template class ReduceScatterInFlight<T>;                                                        \
  template void allgather_in_place<T>(const Mesh&, int, const Kokkos::View<T*>&);                 \
  template AllgatherInFlight<T> start_allgather_in_place<T>(const Mesh&, int,                     \
                                                            const Kokkos::View<T*>&);             \
  template void broadcast<T>(const Mesh&, const std::vector<int>&, const Kokkos::View<T*>&, int); \
  template Kokkos::View<T*> shift<T>(const Mesh&, int, int, bool, const Kokkos::View<T*>&);       \
  template Kokkos::View<T*> permute<T>(const Mesh&, int, const std::vector<int>&,                 \
                                       const Kokkos::View<T*>&);

MTK_INSTANTIATE_COLLECTIVES(float)
MTK_INSTANTIATE_COLLECTIVES(double)
MTK_INSTANTIATE_COLLECTIVES(std::int32_t)
MTK_INSTANTIATE_COLLECTIVES(std::int64_t)

}  // namespace mtk
