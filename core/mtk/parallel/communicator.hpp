#pragma once
// A communicator as a value: rank, size, typed collectives and error agreement. No mpi.h here;
// <mtk/parallel/mpi_interop.hpp> converts to and from MPI_Comm.

#include <mtk/parallel/datatype.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace mtk {

namespace detail {

template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

}  // namespace detail

/// An MPI communicator held by value (EKAT's Comm, Cabana's shared communicator): copies share
/// one MPI communicator, freed with the last copy (never after MPI_Finalize). Every collective
/// below must be called by all ranks of the communicator in the same order. Scalars may be any
/// arithmetic type (bool included); vectors of them and strings are sent whole.
class Communicator {
 public:
  /// A duplicate of MPI_COMM_WORLD: MTK's messages never mix with the application's. Collective.
  static Communicator world();
  /// This process's rank in MPI_COMM_WORLD (no communication: for logs and test hooks).
  static int world_rank();

  int rank() const;
  int size() const;
  void barrier() const;
  /// Ends every process of the job (MPI_Abort) with `code`: for an error only this rank saw,
  /// while the others may wait in a collective.
  [[noreturn]] void abort(int code) const;
  /// A barrier that sleeps while it waits instead of spinning, leaving the cores to the ranks
  /// still working.
  void idle_barrier() const;

  /// The ranks that pass the same `color` (>= 0), ordered by `key`, then by rank. Collective.
  Communicator split(int color, int key = 0) const;
  /// The ranks that share this rank's node (memory), in rank order. Collective.
  Communicator split_node() const;

  /// Root's `value` on every rank. T: arithmetic, std::string, or std::vector of either.
  template <class T>
  T broadcast(T value, int root = 0) const;

  /// Elementwise reduction over the ranks. T: arithmetic or std::vector of arithmetic (the same
  /// length on every rank).
  template <class T>
  T allreduce(T value, ReduceOp op) const;
  template <class T>
  T sum(T value) const {
    return allreduce(std::move(value), ReduceOp::sum);
  }
  template <class T>
  T max(T value) const {
    return allreduce(std::move(value), ReduceOp::max);
  }
  template <class T>
  T min(T value) const {
    return allreduce(std::move(value), ReduceOp::min);
  }

  /// Every rank's `value`, in rank order, on every rank. T: arithmetic or std::string.
  template <class T>
  std::vector<T> allgather(const T& value) const;
  /// Every rank's string, in rank order, on `root` only (empty elsewhere).
  std::vector<std::string> gather(const std::string& value, int root = 0) const;

  /// Error agreement: every rank passes its own failure message ("" when it succeeded). When any
  /// rank failed, every rank throws mtk::AgreedError with the message of the lowest failing rank
  /// (prefixed "[failed on rank N] " on the other ranks), so no rank is left waiting in a later
  /// collective.
  void agree(const std::string& local_failure) const;

  // Buffers of `count` elements (tensor slices); counts are per rank.
  /// In place: the elementwise reduction on every rank.
  template <class T>
  void allreduce_in_place(T* data, std::size_t count, ReduceOp op) const {
    allreduce_raw(data, count, detail::datatype_of<T>(), op);
  }
  /// In place: root's data on every rank.
  template <class T>
  void broadcast_in_place(T* data, std::size_t count, int root) const {
    broadcast_raw(data, count, detail::datatype_of<T>(), root);
  }
  /// `recv` (count * size()) receives every rank's `send`, in rank order.
  template <class T>
  void allgather_into(const T* send, T* recv, std::size_t count) const {
    allgather_raw(send, recv, count, detail::datatype_of<T>());
  }
  /// Block r of `send` goes to rank r; block r of `recv` comes from rank r (blocks of `count`).
  template <class T>
  void alltoall_into(const T* send, T* recv, std::size_t count) const {
    alltoall_raw(send, recv, count, detail::datatype_of<T>());
  }
  /// Reduces `send` (count * size()) over the ranks; rank r keeps block r in `recv`.
  template <class T>
  void reduce_scatter_into(const T* send, T* recv, std::size_t count, ReduceOp op) const {
    reduce_scatter_raw(send, recv, count, detail::datatype_of<T>(), op);
  }
  /// Sends `send` to rank `dest` and receives `recv` from rank `source`; -1: no partner.
  template <class T>
  void sendrecv(const T* send, int dest, T* recv, int source, std::size_t count) const {
    sendrecv_raw(send, dest, recv, source, count, detail::datatype_of<T>());
  }

  /// A non-blocking collective in flight (an MPI_Request): MPI reads and writes its buffers until
  /// it completes, by test() (which also progresses every other collective in flight; MPICH has
  /// no progress thread) or wait() (which waits as collective_wait() says). Move-only; one left
  /// in flight is waited for when destroyed.
  class Request {
   public:
    Request();
    Request(Request&&) noexcept;
    Request& operator=(Request&&) noexcept;
    ~Request();
    /// Whether it completed (true for an empty request).
    bool test();
    void wait();
    bool active() const;

   private:
    friend class Communicator;
    struct State;
    std::unique_ptr<State> state_;
  };
  /// Starts an in-place elementwise reduction on every rank (MPI_Iallreduce; on two ranks, a send
  /// and a receive of the values, combined when both completed): `data` must be neither read nor
  /// written until the request completes. Every rank starts the same collectives in the same
  /// order, blocking ones included.
  template <class T>
  Request start_allreduce_in_place(T* data, std::size_t count, ReduceOp op) const {
    return start_allreduce_raw(data, count, detail::datatype_of<T>(), op);
  }

  /// Starts a reduce-scatter in place: `data` holds size() blocks of `count`; once the request
  /// completes, the reduced block rank() is at element *at of `data` (the rest is undefined). On
  /// two ranks a send of the partner's block and a receive of its part of ours, added when both
  /// completed (a + b on one rank, b + a on the other: the same bits); else
  /// MPI_Ireduce_scatter_block. `data` must be neither read nor written until then.
  template <class T>
  Request start_reduce_scatter_in_place(T* data, std::size_t count, ReduceOp op,
                                        std::size_t* at) const {
    return start_reduce_scatter_raw(data, count, detail::datatype_of<T>(), op, at);
  }

  /// Starts an in-place allgather: `data` holds size() blocks of `count`, this rank's own at
  /// rank(); once the request completes, every block. On two ranks a send of ours and a receive
  /// of the partner's; else MPI_Iallgather with MPI_IN_PLACE. `data` must be neither read nor
  /// written until then.
  template <class T>
  Request start_allgather_in_place(T* data, std::size_t count) const {
    return start_allgather_raw(data, count, detail::datatype_of<T>());
  }

  /// Starts sending `send` to rank `dest` and receiving `recv` from rank `source` (-1: no
  /// partner, nothing moves) without waiting: a neighbour exchange (halo_exchange). Point to
  /// point, so ranks need not start exchanges in the same order as other collectives; `tag`
  /// tells apart the exchanges in flight between the same two ranks.
  template <class T>
  Request start_sendrecv(const T* send, int dest, T* recv, int source, std::size_t count,
                         int tag) const {
    return start_sendrecv_raw(send, dest, recv, source, count, detail::datatype_of<T>(), tag);
  }
  /// The ranks `displacement` steps before and after this one along `direction` of a Cartesian
  /// communicator (MPI_Cart_shift; -1 where a non-periodic dim ends): {source, dest}.
  std::pair<int, int> cart_shift(int direction, int displacement) const;

  /// Whether both span the same processes, in any order.
  bool same_ranks(const Communicator& other) const;

  /// Whether both hold the same MPI communicator (copies do).
  bool operator==(const Communicator& other) const;
  bool operator!=(const Communicator& other) const { return !(*this == other); }

  struct Impl;

 private:
  friend struct CommunicatorAccess;  // mpi_interop: to and from MPI_Comm
  explicit Communicator(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

  void broadcast_raw(void* data, std::size_t count, detail::Datatype type, int root) const;
  void allreduce_raw(void* data, std::size_t count, detail::Datatype type, ReduceOp op) const;
  Request start_allreduce_raw(void* data, std::size_t count, detail::Datatype type,
                              ReduceOp op) const;
  Request start_reduce_scatter_raw(void* data, std::size_t count, detail::Datatype type,
                                   ReduceOp op, std::size_t* at) const;
  Request start_allgather_raw(void* data, std::size_t count, detail::Datatype type) const;
  void allgather_raw(const void* send, void* recv, std::size_t count, detail::Datatype type) const;
  void alltoall_raw(const void* send, void* recv, std::size_t count, detail::Datatype type) const;
  void reduce_scatter_raw(const void* send, void* recv, std::size_t count, detail::Datatype type,
                          ReduceOp op) const;
  void sendrecv_raw(const void* send, int dest, void* recv, int source, std::size_t count,
                    detail::Datatype type) const;
  Request start_sendrecv_raw(const void* send, int dest, void* recv, int source, std::size_t count,
                             detail::Datatype type, int tag) const;
  std::string broadcast_string(std::string value, int root) const;
  std::vector<std::string> broadcast_strings(std::vector<std::string> value, int root) const;
  std::vector<std::string> allgather_strings(const std::string& value) const;

  std::shared_ptr<const Impl> impl_;
};

template <class T>
T Communicator::broadcast(T value, int root) const {
  if constexpr (std::is_same_v<T, std::string>) {
    return broadcast_string(std::move(value), root);
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return broadcast_strings(std::move(value), root);
  } else if constexpr (detail::is_vector<T>::value) {
    auto n = broadcast(static_cast<std::uint64_t>(value.size()), root);
    value.resize(static_cast<std::size_t>(n));
    broadcast_in_place(value.data(), value.size(), root);
    return value;
  } else if constexpr (std::is_same_v<T, bool>) {
    return broadcast(static_cast<int>(value), root) != 0;
  } else {
    broadcast_in_place(&value, 1, root);
    return value;
  }
}

template <class T>
T Communicator::allreduce(T value, ReduceOp op) const {
  if constexpr (detail::is_vector<T>::value) {
    allreduce_in_place(value.data(), value.size(), op);
    return value;
  } else if constexpr (std::is_same_v<T, bool>) {
    return allreduce(static_cast<int>(value), op) != 0;
  } else {
    allreduce_in_place(&value, 1, op);
    return value;
  }
}

template <class T>
std::vector<T> Communicator::allgather(const T& value) const {
  if constexpr (std::is_same_v<T, std::string>) {
    return allgather_strings(value);
  } else if constexpr (std::is_same_v<T, bool>) {
    std::vector<T> out;
    for (int v : allgather(static_cast<int>(value)))
      out.push_back(v != 0);
    return out;
  } else {
    std::vector<T> out(static_cast<std::size_t>(size()));
    allgather_into(&value, out.data(), 1);
    return out;
  }
}

/// Collective error agreement over `comm` (see Communicator::agree).
inline void agree(const Communicator& comm, const std::string& local_failure) {
  comm.agree(local_failure);
}

/// Runs `fn` on every rank of `comm` and agrees on the outcome (see Communicator::agree);
/// returns what `fn` returned.
template <class F>
auto agree_on_failure(const Communicator& comm, F&& fn) -> decltype(fn()) {
  std::string failure;
  if constexpr (std::is_void_v<decltype(fn())>) {
    try {
      fn();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    comm.agree(failure);
  } else {
    decltype(fn()) result{};
    try {
      result = fn();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    comm.agree(failure);
    return result;
  }
}

}  // namespace mtk
