#pragma once
// Shared memory among the ranks of one node (node_reducer, node_halo): one POSIX shm file per
// rank, reserved with posix_fallocate (a full /dev/shm is an error at creation, not a SIGBUS
// later), mapped by every rank of a communicator, its name unlinked once all mapped it (nothing
// is left to clean up when a process dies).

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mtk::detail {

/// One shared file per rank, each mapped by every rank: at[q] is rank q's.
struct SharedBlock {
  std::size_t bytes = 0;
  std::vector<char*> at;
  void unmap();
};

/// Ranks of `comm` that all share one node: a node-local duplicate of `comm` (the same ranks
/// and order), else MPI_COMM_NULL on every rank. Collective.
MPI_Comm node_comm_of(MPI_Comm comm);

/// Names shared files of one owner (a reducer, a channel) apart from every other's in the node:
/// collective over `comm`, it gathers each rank's process id and a number unique in that process.
struct SharedNames {
  explicit SharedNames(MPI_Comm comm);
  /// Collective: every rank makes its file of `bytes`, then maps the others'. False on every
  /// rank where any rank failed (nothing is left mapped or named).
  bool make(SharedBlock& b, std::size_t bytes);

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1, made_ = 0;
  std::vector<long long> ids_;  // per rank: pid and the owner's number there
};

/// Whether `ok` holds on every rank of `comm` (collective).
bool all_ranks(MPI_Comm comm, bool ok);

/// A sequence counter on its own cache line, shared between processes.
struct alignas(64) SharedCounter {
  std::atomic<std::uint64_t> value{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "shared counters must be lock-free atomics (address-free across processes)");

}  // namespace mtk::detail
