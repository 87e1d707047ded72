#include <mtk/cost/step_time.hpp>

#include <algorithm>
#include <cmath>

namespace mtk::cost {

double collective_seconds(const std::string& kind, std::int64_t bytes, std::int64_t calls,
                          std::int64_t p, const LinkLevel& link) {
  if (p <= 1 || calls <= 0)
    return 0;
  const double n = static_cast<double>(bytes) / static_cast<double>(calls);  // per call
  const double a = link.latency, B = link.bandwidth, P = static_cast<double>(p);
  double per_call;
  if (kind == "allreduce") {
    const double ring = 2 * (P - 1) * (a + n / (P * B));
    const double tree = 2 * std::ceil(std::log2(P)) * (a + n / B);
    per_call = std::min(ring, tree);
  } else if (kind == "allconcat") {
    per_call = (P - 1) * (a + n / B);
  } else {  // alltoall and anything that moves a share of its input to every member
    per_call = (P - 1) * (a + n / (P * B));
  }
  return per_call * static_cast<double>(calls);
}

StepTime predict_step_time(const Counters& counters, const MeshShape& mesh, const Machine& machine,
                           const StepTimeOptions& options) {
  StepTime t;
  const double rate = options.bf16 && machine.matmul_bf16_flops > 0 ? machine.matmul_bf16_flops
                                                                    : machine.matmul_flops;
  for (const auto& [kind, flops] : counters.flops) {
    if (kind == "einsum")
      t.matmul_s += flops / rate;
    else
      t.elementwise_s += flops * kElementwiseBytesPerFlop / machine.elementwise_bytes;
  }
  t.compute_s = t.matmul_s + t.elementwise_s;
  for (const auto& [group, bytes] : counters.group_bytes) {
    const auto& [kind, axes] = group;
    std::int64_t p = 1;
    for (int a : axes)
      p *= mesh[a].size;
    const double s = collective_seconds(kind, bytes, counters.group_calls.at(group), p,
                                        machine.link_for(mesh, axes));
    t.comm_s[kind] += s;
    t.comm_total_s += s;
  }
  t.total_s = t.compute_s + t.comm_total_s;
  t.overlapped_s = std::max(t.compute_s, t.comm_total_s);
  return t;
}

}  // namespace mtk::cost
