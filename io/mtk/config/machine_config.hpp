#pragma once
// Machine files for the step-time model (layouts/machines/*.yaml, docs/layout-search.md) <->
// mtk::cost::Machine.

#include <mtk/config/config.hpp>
#include <mtk/cost/machine.hpp>

#include <string>

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
/// Unknown keys and bad values are errors naming the key and file.
cost::Machine machine_from_config(const Config& config);
cost::Machine machine_from_file(const std::string& path);

/// The same format, with `comment` (one or more lines) as a header.
std::string machine_to_yaml(const cost::Machine& machine, const std::string& comment = "");

}  // namespace mtk
