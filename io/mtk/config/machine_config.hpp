#pragma once
// Machine files for the step-time model (layouts/machines/*.yaml, docs/layout-search.md) <->
// mtk::cost::Machine.

#include <mtk/config/config.hpp>
#include <mtk/cost/machine.hpp>

#include <string>
#include <vector>

namespace mtk {

/// Reads a machine file:
///   name: two-core VM
///   matmul_flops: 8.0e10          # FLOP/s per processor (float32)
///   matmul_bf16_flops: 0          # optional
///   matmul_sizes:                 # optional: FLOP/s by FLOPs of one gemm call
///     small: {gemm_flops: 6.6e4, flops: 5.0e9}
///     large: {gemm_flops: 2.1e9, flops: 8.0e10}
///   elementwise_bytes: 1.0e10     # bytes/s per processor
///   op_overhead_s: 5.0e-6         # optional: seconds per kernel step
///   memory_bytes: 4.0e9           # optional, per processor
///   links:                        # by increasing span of consecutive ranks; span 0 = any
///     node: {span: 8, bandwidth: 1.0e11, latency: 5.0e-6}
///     network: {span: 0, bandwidth: 2.5e10, latency: 1.0e-5}
/// The scalars of the machine and of each link level are read through config::Schema tables
/// (each key once, with its type and range). Unknown keys and bad values are errors naming the
/// key and file: every number must be finite (no .nan, .inf) and in range (rates >= 1 per
/// second, sizes > 0, latencies and overheads >= 0, memory_bytes a whole number of bytes, 0 for
/// unknown), and every elementwise_by_kind kind one of machine_step_kinds() (then a
/// cost::KindKey).
cost::Machine machine_from_config(const Config& config);
cost::Machine machine_from_file(const std::string& path);

/// The step kinds a machine file's elementwise_by_kind may name: cost::step_kind_names(), every
/// op kind (make_op_kind) and the lowering's own steps.
const std::vector<std::string>& machine_step_kinds();

/// The same format, with `comment` (one or more lines) as a header.
std::string machine_to_yaml(const cost::Machine& machine, const std::string& comment = "");

}  // namespace mtk
