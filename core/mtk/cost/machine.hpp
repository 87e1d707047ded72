#pragma once
// A machine for the step-time model: per-processor compute rates and memory, and the collective
// bandwidth and latency of a group of processors by how many consecutive ranks it spans (ranks
// are numbered row-major over the mesh, so the last mesh dim groups neighbours: same node).
// Read from and written to YAML by mtk/config/machine_file (MTK::io); see docs/layout-search.md.

#include <mtk/cost/kind_key.hpp>
#include <mtk/parallel/mesh_shape.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtk::cost {

/// The links a collective group may use: the first level whose span covers the group. A level
/// with a stride describes groups over one mesh dim whose ranks lie `stride` apart (the first dim
/// of a 2 x 2 mesh: ranks {0, 2} and {1, 3}), which may share a core or a node where consecutive
/// ranks do not; such a group takes that level before the span rule.
/// One measured allreduce call: its payload bytes per processor and its seconds.
struct CollectivePoint {
  double bytes = 0;
  double seconds = 0;
};

struct LinkLevel {
  std::int64_t span = 0;    ///< groups within this many consecutive ranks (0: any group)
  double bandwidth = 0;     ///< bytes/s one processor sends and receives at once
  double latency = 0;       ///< seconds per message step
  std::int64_t stride = 0;  ///< > 1: only one-dim groups of this rank stride (span still bounds)
  /// Optional: allreduce seconds per call by payload size, measured over groups of
  /// `sizes_group` processors, by increasing bytes. Protocol switches (eager, pipelined,
  /// single-copy) and ranks that wait to be scheduled make the cost a step function of the size
  /// that latency + size / bandwidth does not follow; groups of that size use these points.
  std::int64_t sizes_group = 0;
  std::vector<CollectivePoint> allreduce_sizes = {};

  /// Seconds of one allreduce call of `bytes` per processor over `p` processors, from
  /// allreduce_sizes when they were measured for groups of `p`, else nothing (returns < 0).
  /// Interpolated linearly in log(bytes); below the first point its time; beyond the last, the
  /// last plus the bandwidth cost of the extra bytes.
  double measured_allreduce_seconds(double bytes, std::int64_t p) const;
  /// Optional: seconds of one neighbour exchange (halo_exchange's: a strip sent to each
  /// neighbour and one received from each, started and waited for) by the bytes of both strips,
  /// by increasing bytes. The calls into MPI and the hand-over cost tens of microseconds where
  /// latency + bytes / bandwidth says one; any group size (an exchange has two partners).
  std::vector<CollectivePoint> halo_sizes = {};
  /// Whether this level's neighbour exchanges go through shared memory (node_halo.hpp): the
  /// strips cross between cores in the ranks' own copies (packed into the sender's slot, placed
  /// from it), work of the ranks' cores that no overlap hides; through a network the transfer
  /// runs while the ranks compute.
  bool halo_by_copies = false;
  /// Seconds of one neighbour exchange of `bytes` from halo_sizes (interpolated as allreduces;
  /// beyond the last point its time plus the extra bytes at `bandwidth`), else < 0.
  double measured_halo_seconds(double bytes) const;
};

/// The matmul rate measured at one gemm size (FLOPs of one gemm call).
struct MatmulPoint {
  double gemm_flops = 0;  ///< 2 M N K of one gemm call
  double flops = 0;       ///< FLOP/s per processor at that size
};

/// The matmul rate of gemm calls whose narrowest dim has `narrow` positions (the other two large).
struct NarrowMatmulPoint {
  double narrow = 0;  ///< the narrow dim's size
  double flops = 0;   ///< FLOP/s per processor
};

struct Machine {
  std::string name;
  double matmul_flops = 0;       ///< FLOP/s per processor, float32 matmuls (einsum)
  double matmul_bf16_flops = 0;  ///< FLOP/s per processor in bf16 (0: not available)
  double elementwise_bytes = 0;  ///< bytes/s per processor for elementwise kernels
  /// Optional: bytes/s for the steps of one kind (Counters::op_bytes' kinds: binary, unary,
  /// reduce, ...), whose kernels run at rates far apart; other kinds use elementwise_bytes.
  std::map<KindKey, double> elementwise_by_kind = {};
  std::int64_t memory_bytes = 0;  ///< per processor (0: unknown)
  /// Optional: matmul rate by gemm size, for small and skinny products (batched attention
  /// products run one small gemm per batch entry). Empty: matmul_flops at every size.
  std::vector<MatmulPoint> matmul_sizes;
  /// Optional: matmul rate of skinny gemm calls by the size of their narrowest dim, measured on
  /// [4096, 256] x [256, narrow] (`outer`: a dim of the result is narrow) and on
  /// [4096, narrow] x [narrow, 256] (`inner`: the summed dim is). Empty: no such bound.
  std::vector<NarrowMatmulPoint> matmul_narrow_outer, matmul_narrow_inner;
  /// Optional: seconds of fixed cost per kernel step (launch, output allocation, dispatch).
  double op_overhead_s = 0;
  /// Span levels by increasing span, the last one with span 0; strided levels anywhere.
  std::vector<LinkLevel> links;

  /// Throws naming the field and value when a rate is not positive or links are missing.
  void validate() const;
  /// FLOP/s of float32 gemm calls of `gemm_flops` each: matmul_sizes interpolated linearly in
  /// log(size) and log(rate), the end points held beyond the measured range; matmul_flops when
  /// matmul_sizes is empty.
  double matmul_rate(double gemm_flops) const;
  /// The same for calls whose narrowest dim has `narrow` positions (0: none), the summed one
  /// where `inner`: the lower of matmul_rate(gemm_flops) and the narrow points' rate
  /// (interpolated in log(narrow) and log(rate), the first point held below it; no bound past
  /// the last point).
  double matmul_rate(double gemm_flops, std::int64_t narrow, bool inner) const;
  /// Bytes/s of steps of `kind`: elementwise_by_kind's entry, else elementwise_bytes.
  double elementwise_rate(const KindKey& kind) const;
  /// The link used by a group over mesh `axes` of `mesh` (row-major ranks).
  const LinkLevel& link_for(const MeshShape& mesh, const std::vector<int>& axes) const;
};

/// A reference machine for when no machine file is given (mtk-layout search without --machine,
/// `mesh: auto` without train.machine): 1e11 FLOP/s, 1e10 B/s, one link of 1e10 B/s and 10 us;
/// its rankings are rough, a calibrated file (mtk-layout calibrate) is better.
Machine reference_machine();

/// Consecutive ranks spanned by a group over mesh `axes`: (last rank - first rank + 1) of the
/// group containing processor 0.
std::int64_t group_span(const MeshShape& mesh, const std::vector<int>& axes);
/// The rank stride of a group over one mesh dim (the product of the later dims' sizes); 0 for a
/// group over several dims or none.
std::int64_t group_stride(const MeshShape& mesh, const std::vector<int>& axes);

}  // namespace mtk::cost
