#pragma once
// How a rank waits inside a blocking collective. MPI libraries poll in a busy loop; with more
// ranks than cores, a polling rank keeps the core its partner needs until the scheduler's next
// tick (milliseconds), so every collective between ranks that share a core costs ticks. Yielding
// the core between polls hands it over at once.

#include <mtk/parallel/communicator.hpp>

#include <string>

namespace mtk {

enum class CollectiveWait {
  spin,   ///< the MPI library's own blocking call (busy polling)
  yield,  ///< the non-blocking call, then MPI_Test and a yield of the core until it completes
};

/// The policy in force for every Communicator of this process (spin until set).
CollectiveWait collective_wait();
void set_collective_wait(CollectiveWait wait);
const char* to_string(CollectiveWait wait);

/// Between two polls of a wait on shared memory (node_reducer, node_halo), `polls` made so far:
/// yields the core under CollectiveWait::yield and, past 1000 polls, under spin too (as MPI
/// libraries' progress loops do), so that a rank whose partner shares its core lets it run.
void pause_between_polls(unsigned polls);

/// Whether the ranks of `comm` on this node outnumber the CPUs they may run on (the union of their
/// affinity masks). Collective over `comm`.
bool node_oversubscribed(const Communicator& comm);

/// The policy the run-time option MTK_COLLECTIVE_WAIT asks for (<mtk/base/runtime_options.hpp>):
/// "spin", "yield", or "auto" (the default when unset or empty: yield where
/// node_oversubscribed(comm), else spin). Collective over `comm`.
CollectiveWait choose_collective_wait(const Communicator& comm);

}  // namespace mtk
