#pragma once
// How much memory a rank may use, checked before a tool allocates a model: a batch or a model too
// big for the machine is refused with the figures instead of dying in the allocator (or being
// killed by the OOM killer on one rank while the others wait).

#include <mtk/parallel/communicator.hpp>

#include <cstdint>
#include <string>

namespace mtk {

/// The memory this node offers, and the ranks that share it.
struct MemoryBudget {
  /// The least of /proc/meminfo's MemAvailable and the cgroup's limit minus its usage (cgroup
  /// v2 memory.max / memory.current, or v1 memory.limit_in_bytes / memory.usage_in_bytes);
  /// -1 when none could be read.
  std::int64_t node_bytes = -1;
  /// Where node_bytes came from, e.g. "MemAvailable" or "cgroup memory.max".
  std::string source;
  /// The ranks of `comm` on this node.
  int ranks_on_node = 1;
  /// node_bytes / ranks_on_node, or -1 when unknown.
  std::int64_t per_rank() const { return node_bytes < 0 ? -1 : node_bytes / ranks_on_node; }
};

/// This node's budget. Collective over `comm` (it counts the ranks sharing the node).
MemoryBudget host_memory_budget(const Communicator& comm);

/// Fails on every rank of `comm` (mtk::AgreedError) when some rank's
/// `peak_bytes` exceed its share of its node's memory, giving both figures. Does nothing when
/// the budget cannot be read or the program's memory is not host memory (a GPU build).
/// Collective.
/// `what` names the program in the message ("the model (...) on mesh batch:2").
void check_memory_fits(const Communicator& comm, std::int64_t peak_bytes, const std::string& what);

}  // namespace mtk
