#pragma once
// The run-time side of overlapped collectives
// (docs/ops-and-lowering.md#overlapped-gradient-reductions): the buckets the overlap pass
// (mtk/lower/overlap.hpp) planned and the state their start and wait steps share while a program
// runs.

#include <mtk/graph/op_def.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/mesh.hpp>
#include <mtk/runtime/program.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace mtk {

/// A zero_gather step's in-place allgather (mtk/optim/zero.cpp), by its output tensor: the new
/// shard `part` is copied to elements [off, off + count) of the variable's float32 `storage`
/// (unless it is there already), which is then allgathered in place along mesh axis `axis`.
struct GatherSpec {
  int variable = -1, part = -1, axis = 0;
  const Program::Buffer* storage = nullptr;
  std::int64_t off = 0, count = 0;
};
using GatherSpecs = std::map<int, GatherSpec>;

/// One non-blocking allreduce: the tensors reduced together over the same mesh axes (or one
/// reduce-scatter, or one in-place allgather).
struct ReductionBucket {
  std::vector<int> tensors;          ///< in pack order
  std::vector<std::int64_t> counts;  ///< elements of each tensor's slice
  std::vector<int> axes;             ///< the mesh axes of the sum
  int start_after = -1;              ///< it starts after this step (index in the planned steps)
  int wait_before = 0;               ///< it is waited for before this step
  std::int64_t bytes = 0;            ///< payload of the one call
  int scatter_out = -1;  ///< a reduce-scatter's output tensor (-1: an in-place allreduce)
  Shape scatter_local;   ///< a reduce-scatter's input slice shape
  int scatter_dim = -1;  ///< and the dim it scatters along
  int gather_out = -1;   ///< an in-place allgather's output tensor (its spec: `gather`)
  GatherSpec gather;
};

/// The kind of the steps that wait for an overlapped reduction (time_split()'s "collective waits").
StepKind reduction_wait_kind();
/// The kind of the steps that wait for an overlapped allgather (also "collective waits").
StepKind gather_wait_kind();

/// The run-time state of a program's overlapped reductions, shared by its start and wait steps.
class ReductionsInFlight {
 public:
  ReductionsInFlight(const Mesh& mesh, std::vector<ReductionBucket> buckets);
  ReductionsInFlight(const ReductionsInFlight&) = delete;
  ReductionsInFlight& operator=(const ReductionsInFlight&) = delete;

  /// Starts bucket k (packing a shared bucket).
  void start(int k, Program::Buffers& b);
  /// Completes bucket k (unpacking a shared bucket into its tensors).
  void wait(int k, Program::Buffers& b);
  /// Lets MPI move the data of the reductions in flight (MPI_Test on the oldest incomplete).
  void progress();
  /// Before `step` runs: completes an in-place reduction whose storage the step would read or
  /// write under another tensor's name (a buffer shared without an alias step). True if it waited.
  bool before_step(const Program::Step& step, Program::Buffers& b);
  /// Whether a reduction was started and not yet waited for.
  bool in_flight() const { return !in_flight_.empty(); }
  /// Completes every reduction still in flight, unpacking nothing (after a failed run).
  void drain();
  const std::vector<ReductionBucket>& buckets() const { return buckets_; }

 private:
  struct Flight {
    AllreduceInFlight<float> op;
    ReduceScatterInFlight<float> scatter;  // instead, for a reduce-scatter bucket
    AllgatherInFlight<float> gather;       // or for an allgather
    const void* in_place = nullptr;        // the tensor's own storage, when reduced in place
    bool started = false;
    bool complete = false;
    bool waited_early = false;  // by before_step(): its wait step has nothing left to do
  };
  Mesh mesh_;
  std::vector<ReductionBucket> buckets_;
  std::vector<Flight> flights_;
  std::vector<Kokkos::View<float*>> packed_;  // per shared bucket, kept across runs
  std::vector<int> in_flight_;                // started, not yet waited for, in start order
  int in_place_ = 0;                          // how many of those are reduced in place
};

}  // namespace mtk
