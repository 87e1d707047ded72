#pragma once
// Non-blocking allreduces among ranks that share one node's memory, through shared memory instead
// of MPI's messages (docs/performance.md). With one rank per core no core is idle to move the
// values, so an allreduce costs the calling ranks its copies and sums: MPI's two-rank exchange
// copies every value into the partner and adds it there (about three copies' time per value on
// Zen 4); here each rank copies into its shared region only the parts other ranks sum, sums its
// own part reading the others' regions directly, and copies the others' sums back (two).
//
// Each reduction's values are cut into size() contiguous parts; rank r sums part r over the ranks
// in rank order (the same bits on every rank; with two ranks a + b, as MPI's exchange gives).
// Reduce-scatters (the parts are the blocks; rank r keeps its sum) and allgathers (each rank
// copies the others' blocks from their regions) go the same way, for the sharded optimizer.
// Progress is made by whichever call of the reducer comes next on a rank (start, test or wait):
// every rank must start the same reductions in the same order, as for MPI's collectives.

#include <mtk/parallel/datatype.hpp>
#include <mtk/parallel/shared_block.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace mtk {

class Communicator;  // owns a NodeReducerSlot (communicator.cpp); declared only, no include cycle

/// Whether non-blocking float allreduces among the ranks of one node go through shared memory
/// (program.node_allreduce, default on; never in a build for a CUDA-aware MPI, which is handed
/// device memory). The applications set it from their run config before the first reducer is
/// made; set it alike on every rank.
bool node_allreduce();
void set_node_allreduce(bool on);

namespace detail {

class NodeReducer {
 public:
  /// Collective over `comm`: a reducer when node_allreduce() on every rank, the ranks all share
  /// one node's memory and its shared control block could be made; else null (use MPI).
  static std::shared_ptr<NodeReducer> create(MPI_Comm comm);
  ~NodeReducer();
  NodeReducer(const NodeReducer&) = delete;
  NodeReducer& operator=(const NodeReducer&) = delete;

  /// How many reductions this process has run through shared memory (for tests and reports).
  static std::uint64_t started_total();
  /// The smallest reduction, in bytes, worth taking (smaller ones cost less through MPI).
  static std::size_t min_bytes();
  /// Whether start() takes a reduction of this kind: float or double, `bytes` at least a few KiB
  /// (smaller ones cost less through MPI). The same answer on every rank for the same call.
  bool takes(Datatype type, std::size_t bytes) const;
  /// What a reduction computes. `data` holds `count` elements; for reduce_scatter and allgather
  /// size() blocks of count / size(), this rank's at rank().
  enum class Kind {
    allreduce,       ///< every element reduced over the ranks
    reduce_scatter,  ///< this rank's block reduced (the other blocks are left as they were)
    allgather,       ///< every rank's own block, as is
  };
  /// Starts a reduction of `data` in place; -1 where no shared region could be made (every rank
  /// then gets -1 and falls back to MPI; later calls do too). Collective when it makes a new
  /// shared region. `data` must be neither read nor written until wait() returns.
  std::int64_t start(Kind kind, void* data, std::size_t count, Datatype type, ReduceOp op);
  /// Moves every reduction in flight as far as it can go; whether `ticket` is complete.
  bool test(std::int64_t ticket);
  /// Until `ticket` is complete (yielding the core between checks where collective_wait() says
  /// yield); then its region may be reused. Every started ticket must be waited for.
  void wait(std::int64_t ticket);

  /// Collective over the reducer's ranks: a shared file of `bytes` per rank, mapped by every
  /// rank (node_halo's channels); false on every rank where any rank failed.
  bool make_shared(SharedBlock& block, std::size_t bytes);
  /// The reducer's node communicator (the same ranks, in the same order, as its creator's).
  MPI_Comm comm() const;

  struct Impl;

 private:
  explicit NodeReducer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A communicator's reducer, made at its first reduction that could go through shared memory.
struct NodeReducerSlot {
  std::shared_ptr<NodeReducer> reducer;
  bool checked = false;
  /// The reducer, made first (a collective over `comm`) where this is the first call; null
  /// where the ranks do not share a node or node_allreduce() is off.
  std::shared_ptr<NodeReducer> get(MPI_Comm comm);
  /// Starts `data` through the reducer (making it first, a collective over `comm`) where it
  /// takes the reduction: its ticket; else -1 (use MPI). The same answer on every rank.
  std::int64_t start(MPI_Comm comm, NodeReducer::Kind kind, void* data, std::size_t count,
                     Datatype type, ReduceOp op);
};

}  // namespace detail

/// The shared-memory reducer of `comm`'s ranks (made at the first call on `comm` or at its first
/// reduction that goes through shared memory: a collective then), or null.
std::shared_ptr<detail::NodeReducer> node_reducer_of(const Communicator& comm);

}  // namespace mtk
