#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/lower/lowering_context.hpp>

#include <algorithm>
#include <cmath>

namespace mtk {

// The exact counters of the lowered program (Counters, mtk/runtime/counters.hpp), step by step.

// The step's calls, bytes and FLOPs in counters(); `moved_bytes` >= 0: its bytes
// (count_moved_bytes).
void Lowering::count_step(const Program::Step& step, double flops, std::int64_t moved_bytes) {
  const StepKind kind = step.kind;
  p_->counters_.op_calls[kind] += 1;
  std::int64_t& bytes = p_->counters_.op_bytes[kind];
  const char* where = "mtk::lower";
  if (moved_bytes >= 0) {
    bytes = checked_add(bytes, moved_bytes, where,
                        [&] { return cat("the bytes moved by '", step.what, "'"); });
    if (kind.traits().flops != FlopClass::none)
      p_->counters_.flops[kind.traits().flops] += flops;
    return;
  }
  if (kind.traits().halo) {  // an exchange's steps move its strips, not their buffers: flops
    bytes = checked_add(bytes, static_cast<std::int64_t>(flops) * 2 * 4, where,
                        [&] { return cat("the bytes moved by '", step.what, "'"); });
    p_->counters_.flops[kind.traits().flops] += flops;
    return;
  }
  for (int t : step.reads)
    bytes = checked_add(bytes, local_bytes(t), where,
                        [&] { return cat("the bytes read by '", step.what, "'"); });
  for (int t : step.writes)
    bytes = checked_add(bytes, local_bytes(t), where,
                        [&] { return cat("the bytes written by '", step.what, "'"); });
  if (kind.traits().flops != FlopClass::none)
    p_->counters_.flops[kind.traits().flops] += flops;
}

void Lowering::count_moved_bytes(std::int64_t bytes) {
  next_origin_.bytes = bytes;
}

void Lowering::count_gemms(std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t gemms) {
  const double each =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (gemms <= 0 || !(each > 0))
    return;
  const GemmCalls g{GemmClass::of(m, n, k), each, gemms};
  next_origin_.gemms.push_back(g);
  add_gemm_counters(g);
}

void Lowering::add_gemm_counters(const GemmCalls& g) {
  auto& [flops, calls] = p_->counters_.gemm_by_size[g.cls];
  flops += g.flops_each * static_cast<double>(g.calls);
  calls += g.calls;
}

void Lowering::count_flops(FlopClass c, double flops) {
  p_->counters_.flops[c] += flops;
}

void Lowering::count_comm(Collective kind, std::int64_t bytes, std::vector<int> axes) {
  communicates_ = true;
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  next_origin_.comm.push_back({kind, bytes, axes});
  add_comm_counters(next_origin_.comm.back());
}

void Lowering::add_comm_counters(const CommCount& c) {
  const char* where = "mtk::lower";
  const Collective kind = c.kind;
  const std::int64_t bytes = c.bytes;
  auto& total = p_->counters_.comm_bytes[kind];
  total = checked_add(total, bytes, where,
                      [&] { return cat("the bytes of ", to_string(kind), " collectives"); });
  p_->counters_.comm_calls[kind] += 1;
  const Counters::CommGroup key{kind, c.axes};
  auto& group_total = p_->counters_.group_bytes[key];
  group_total = checked_add(group_total, bytes, where,
                            [&] { return cat("the bytes of ", to_string(kind), " collectives"); });
  p_->counters_.group_calls[key] += 1;
  const int size_key =
      bytes > 0 ? static_cast<int>(std::floor(std::log2(static_cast<double>(bytes)))) : -1;
  auto& [size_bytes, size_calls] = p_->counters_.group_sizes[key][size_key];
  size_bytes = checked_add(size_bytes, bytes, where,
                           [&] { return cat("the bytes of ", to_string(kind), " collectives"); });
  size_calls += 1;
}

}  // namespace mtk
