#pragma once
// Predicted time of one training step on one processor, from analyze()'s exact counters and a
// Machine: gemm calls at the matmul rate of their size, the bytes every kernel step reads and
// writes at the elementwise bandwidth, a fixed overhead per kernel step, and each collective by the
// ring or tree cost (whichever is cheaper) over its group's link, latency per call included.

#include <mtk/cost/machine.hpp>
#include <mtk/parallel/mesh_shape.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtk::cost {

/// Bytes an elementwise kernel moves per counted FLOP (two float reads, one write); used only
/// for counters without op_bytes.
inline constexpr double kElementwiseBytesPerFlop = 12.0;

struct StepTimeOptions {
  bool bf16 = false;  ///< matmuls at matmul_bf16_flops (when the machine has it)
  /// Halo exchanges overlap the interior computation (program.overlap_halo: true; off by default):
  /// only the part of their time that the compute between start and finish cannot cover is counted.
  bool overlap_halo = false;
};

struct StepTime {
  double matmul_s = 0;       ///< gemm FLOPs at the rate of their size
  double elementwise_s = 0;  ///< bytes read and written by kernel steps at elementwise_bytes
  double overhead_s = 0;     ///< kernel steps x op_overhead_s
  std::int64_t kernel_steps = 0;
  /// Per step kind (counters with op_bytes): its bytes at its rate and its calls' overhead, the
  /// einsum's with matmul_s, to set beside a profile's time per kind.
  std::map<KindKey, double> kind_s;
  double compute_s = 0;                 ///< matmul_s + elementwise_s + overhead_s
  std::map<Collective, double> comm_s;  ///< per collective
  double comm_total_s = 0;
  /// Of comm_s[halo]: the part hidden behind the matrix products and the part left exposed.
  /// With overlap_halo, per exchange of Counters::halo_exchanges hidden = min(its time, the time
  /// of the gemm calls between its start and its finish); exposed = the rest. Without
  /// overlap_halo, or on a link whose exchanges are the cores' own copies
  /// (LinkLevel::halo_by_copies), exposed = halo and hidden = 0.
  double halo_hidden_s = 0;
  double halo_exposed_s = 0;
  /// One split halo exchange's figures (Counters::Exchange, in the same order).
  struct Exchange {
    double halo_s = 0;     ///< its modeled time (collective_seconds, one call)
    double between_s = 0;  ///< the gemm calls between its start and its finish
    double hidden_s = 0;   ///< min(halo_s, between_s) with overlap_halo (not by copies), else 0
    double exposed_s = 0;  ///< halo_s - hidden_s
  };
  std::vector<Exchange> halo_exchanges;
  /// The split halo exchanges' steps (OpTraits::halo) as a profile times them: their kernels'
  /// bytes at the elementwise rate of their kind, their calls' overhead, and halo_exposed_s.
  /// Local copies along unsplit dims are not in it.
  double halo_steps_s = 0;
  /// Counters without per-exchange records (made by hand, or by an older path) but with halo
  /// traffic: the hidden part was bounded by all of the step's products instead,
  /// exposed = max(0, halo - matmul_s).
  bool halo_whole_step_bound = false;
  /// compute + communication - halo_hidden_s: MTK runs collectives between kernels, one after the
  /// other, except the hidden part of the halo exchanges.
  double total_s = 0;
  /// max(compute, communication): the bound once collectives (gradient allreduces first) run
  /// concurrently with compute.
  double overlapped_s = 0;
};

/// Seconds for `calls` calls of collective `kind` moving
/// `bytes` payload in all over a group of `p` processors on `link`. Ring: allreduce
/// 2(p-1)(a + n/(pB)), allconcat (p-1)(a + n/B) with n the input slice, reduce_scatter the same
/// with n the output slice (half the allreduce's ring of its input), alltoall (p-1)(a + n/(pB));
/// allreduce also has the tree 2 log2(p)(a + n/B); the cheaper one is taken per call; a halo
/// exchange (both neighbours' strips at once) a + n/B. An
/// allreduce over a link whose allreduce_sizes were measured for groups of `p` takes those
/// instead (LinkLevel::measured_allreduce_seconds); a halo exchange over a link with halo_sizes
/// takes those (LinkLevel::measured_halo_seconds).
double collective_seconds(Collective kind, std::int64_t bytes, std::int64_t calls, std::int64_t p,
                          const LinkLevel& link);

/// The step time of a program with `counters` lowered on `mesh` (group_bytes give each
/// collective's mesh axes; group_sizes, when present, its calls by size).
StepTime predict_step_time(const Counters& counters, const MeshShape& mesh, const Machine& machine,
                           const StepTimeOptions& options = {});

}  // namespace mtk::cost
