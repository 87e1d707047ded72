#pragma once
// What one run of a lowered program costs per rank, counted exactly by the lowering
// (Program::counters; the cost model in mtk/cost/ reads them).

#include <mtk/graph/op_def.hpp>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace mtk {

/// The collectives a lowered program runs (Counters::comm_bytes, the cost model). `halo` is the
/// neighbour exchange of halo_exchange/halo_reduce: its bytes are the strips one rank sends to its
/// two neighbours along the mesh dim (both sides counted, as an interior rank sends them).
/// The collectives Counters count. allconcat is the allgather (payload: the input slice);
/// reduce_scatter's payload is its output slice (what each member keeps, 1/p of its input).
enum class Collective { allreduce, allconcat, alltoall, halo, reduce_scatter };
const char* to_string(Collective c);

/// A gemm call's class for the step model (Counters::gemm_by_size): its size and, where one of
/// M, N, K is below kNarrow, that narrowest dim (skinny products run far below the rate of square
/// ones of the same FLOPs: a convolution's few channels, attention's d_kv).
struct GemmClass {
  static constexpr std::int64_t kNarrow = 256;
  int log2_flops = 0;       ///< floor(log2(FLOPs of one call))
  std::int64_t narrow = 0;  ///< the smallest of M, N, K where below kNarrow; 0: none
  bool inner = false;       ///< narrow is K, the summed dim (else a dim of the result)
  /// The class of a call of `flops_each` FLOPs, without shape (narrow 0).
  static GemmClass of_flops(double flops_each);
  /// The class of an [m, k] x [k, n] call.
  static GemmClass of(std::int64_t m, std::int64_t n, std::int64_t k);
  bool operator<(const GemmClass& o) const;
  bool operator==(const GemmClass& o) const;
};

/// A step's gemm calls of one class: `calls` calls of `flops_each` FLOPs.
struct GemmCalls {
  GemmClass cls;
  double flops_each = 0;
  std::int64_t calls = 0;
};

/// Exact per-rank costs of one run of the lowered program.
struct Counters {
  std::map<FlopClass, double> flops;              ///< per op kind's FLOP class (OpTraits)
  std::map<Collective, std::int64_t> comm_bytes;  ///< per collective: payload bytes
  std::map<Collective, std::int64_t> comm_calls;  ///< per collective
  /// The same per collective and group (the mesh axes it runs over, sorted), for cost models
  /// whose bandwidth depends on the mesh dims (mtk/cost/step_time.hpp).
  using CommGroup = std::pair<Collective, std::vector<int>>;
  std::map<CommGroup, std::int64_t> group_bytes;
  std::map<CommGroup, std::int64_t> group_calls;
  /// The same per group by call size: key floor(log2(payload bytes of one call)) (-1 for an
  /// empty call), value {bytes, calls}; for links whose cost is measured by size.
  std::map<CommGroup, std::map<int, std::pair<std::int64_t, std::int64_t>>> group_sizes;
  /// Per step kind (the op kind a step lowers, or the lowering's alias, allreduce and relayout
  /// steps): steps run, and bytes of the local slices they read and write. For the step-time
  /// model's per-op overhead and elementwise memory traffic.
  std::map<StepKind, std::int64_t> op_calls;
  std::map<StepKind, std::int64_t> op_bytes;
  /// Matrix products run as gemm calls, by class (size and narrowest dim), value {FLOPs, gemm
  /// calls}. Einsums the kernel runs as elementwise work are not here.
  std::map<GemmClass, std::pair<double, std::int64_t>> gemm_by_size;
  /// One split halo exchange as the program runs it (in its final step order: after
  /// recomputation and the overlap passes): the work between its start and its finish is what
  /// can hide it (mtk/cost/step_time.hpp).
  struct Exchange {
    CommGroup group;            ///< Collective::halo and the mesh axes it runs over
    std::int64_t bytes = 0;     ///< payload of the call
    int start = 0, finish = 0;  ///< its start and finish steps
    /// The gemm calls of the steps strictly between start and finish, keyed as gemm_by_size.
    std::map<GemmClass, std::pair<double, std::int64_t>> gemm_between;
  };
  /// Every split halo exchange, in start order; empty in counters made by hand.
  std::vector<Exchange> halo_exchanges;
  std::int64_t variable_bytes = 0;  ///< persistent variable slices
  /// What a run holds per rank at its peak, variables included: pool_bytes with buffer reuse on
  /// (the default), else live_peak_bytes (mtk/lower/memory_model.hpp).
  std::int64_t peak_bytes = 0;
  /// Variables + the most bytes of buffers alive at once (what a run without reuse holds).
  std::int64_t live_peak_bytes = 0;
  /// What the buffer pool holds after a run: per element type and size, the most buffers of it
  /// alive at once (variables' storage among them), plus packed reduction buckets.
  std::int64_t pool_bytes = 0;
  /// The part of pool_bytes held outside the buffer pool: packed reduction buckets and the
  /// variables' bf16 copies.
  std::int64_t outside_pool_bytes = 0;
  double total_flops() const;
  /// FLOPs of one class (0 when it has none).
  double flops_of(FlopClass c) const;
  std::int64_t total_comm_bytes() const;
};

}  // namespace mtk
