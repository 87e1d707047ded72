#include <mtk/cost/step_time.hpp>

#include <algorithm>
#include <cmath>

namespace mtk::cost {

double collective_seconds(Collective kind, std::int64_t bytes, std::int64_t calls, std::int64_t p,
                          const LinkLevel& link) {
  if (p <= 1 || calls <= 0)
    return 0;
  const double n = static_cast<double>(bytes) / static_cast<double>(calls);  // per call
  const double a = link.latency, B = link.bandwidth, P = static_cast<double>(p);
  double per_call;
  if (const double measured =
          kind == Collective::allreduce ? link.measured_allreduce_seconds(n, p) : -1;
      measured >= 0) {
    per_call = measured;
  } else if (kind == Collective::allreduce) {
    const double ring = 2 * (P - 1) * (a + n / (P * B));
    const double tree = 2 * std::ceil(std::log2(P)) * (a + n / B);
    per_call = std::min(ring, tree);
  } else if (kind == Collective::halo) {
    // Two strips, one to each neighbour, sent at once whatever the group's size.
    const double measured_halo = link.measured_halo_seconds(n);
    per_call = measured_halo >= 0 ? measured_halo : a + n / B;
  } else if (kind == Collective::allconcat || kind == Collective::reduce_scatter) {
    per_call = (P - 1) * (a + n / B);  // n: the slice each member sends (keeps) per step
  } else {  // alltoall and anything that moves a share of its input to every member
    per_call = (P - 1) * (a + n / (P * B));
  }
  return per_call * static_cast<double>(calls);
}

namespace {

// Seconds of gemm calls keyed as Counters::gemm_by_size, each size at its rate.
double gemm_seconds(const std::map<GemmClass, std::pair<double, std::int64_t>>& by_size,
                    const Machine& machine, double scale) {
  double s = 0;
  for (const auto& [cls, fc] : by_size) {
    const auto& [flops, calls] = fc;
    s += flops /
         (scale * machine.matmul_rate(flops / static_cast<double>(calls), cls.narrow, cls.inner));
  }
  return s;
}

std::int64_t group_processors(const MeshShape& mesh, const std::vector<int>& axes) {
  std::int64_t p = 1;
  for (int a : axes)
    p *= mesh[a].size;
  return p;
}

// Of t.comm_s[halo]: the hidden and exposed parts (StepTime::halo_hidden_s).
void split_halo(const Counters& counters, const MeshShape& mesh, const Machine& machine,
                double scale, bool overlap, StepTime& t) {
  const auto halo = t.comm_s.find(Collective::halo);
  const double halo_s = halo == t.comm_s.end() ? 0.0 : halo->second;
  if (counters.halo_exchanges.empty() && halo_s > 0) {
    // Fallback for counters without per-exchange records: all of the step's products may hide
    // the halo, a looser bound than the products between each start and finish.
    t.halo_whole_step_bound = true;
    t.halo_exposed_s = overlap ? std::max(0.0, halo_s - t.matmul_s) : halo_s;
    t.halo_hidden_s = halo_s - t.halo_exposed_s;
    return;
  }
  for (const Counters::Exchange& e : counters.halo_exchanges) {
    StepTime::Exchange x;
    const auto& [kind, axes] = e.group;
    const LinkLevel& link = machine.link_for(mesh, axes);
    x.halo_s = collective_seconds(kind, e.bytes, 1, group_processors(mesh, axes), link);
    x.between_s = gemm_seconds(e.gemm_between, machine, scale);
    x.hidden_s = overlap && !link.halo_by_copies ? std::min(x.halo_s, x.between_s) : 0.0;
    x.exposed_s = x.halo_s - x.hidden_s;
    t.halo_hidden_s += x.hidden_s;
    t.halo_exchanges.push_back(x);
  }
  // Halo time no record covers (none is expected) stays exposed.
  t.halo_hidden_s = std::min(t.halo_hidden_s, halo_s);
  t.halo_exposed_s = halo_s - t.halo_hidden_s;
}

}  // namespace

StepTime predict_step_time(const Counters& counters, const MeshShape& mesh, const Machine& machine,
                           const StepTimeOptions& options) {
  StepTime t;
  // bf16 scales the whole size curve by the ratio of the large-gemm rates.
  const double scale = options.bf16 && machine.matmul_bf16_flops > 0
                           ? machine.matmul_bf16_flops / machine.matmul_flops
                           : 1.0;
  if (!counters.gemm_by_size.empty())
    t.matmul_s = gemm_seconds(counters.gemm_by_size, machine, scale);
  else  // hand-made counters: one rate for all
    t.matmul_s = counters.flops_of(FlopClass::einsum) / (scale * machine.matmul_flops);
  if (!counters.op_bytes.empty()) {
    for (const auto& [kind, bytes] : counters.op_bytes)
      if (!kind.traits().free) {
        const double s = static_cast<double>(bytes) / machine.elementwise_rate(kind);
        t.elementwise_s += s;
        t.kind_s[kind] += s;
      }
    for (const auto& [kind, calls] : counters.op_calls)
      if (!kind.traits().free) {
        t.kernel_steps += calls;
        t.kind_s[kind] += static_cast<double>(calls) * machine.op_overhead_s;
      }
    t.kind_s[KindKey::einsum()] += t.matmul_s;
  } else {
    for (const auto& [kind, flops] : counters.flops)
      if (kind != FlopClass::einsum)
        t.elementwise_s += flops * kElementwiseBytesPerFlop / machine.elementwise_bytes;
  }
  t.overhead_s = static_cast<double>(t.kernel_steps) * machine.op_overhead_s;
  t.compute_s = t.matmul_s + t.elementwise_s + t.overhead_s;
  for (const auto& [group, bytes] : counters.group_bytes) {
    const auto& [kind, axes] = group;
    const std::int64_t p = group_processors(mesh, axes);
    const LinkLevel& link = machine.link_for(mesh, axes);
    double s = 0;
    if (const auto it = counters.group_sizes.find(group); it != counters.group_sizes.end()) {
      for (const auto& [size_key, bc] : it->second)  // per size: the cost is not linear in it
        s += collective_seconds(kind, bc.first, bc.second, p, link);
    } else {
      s = collective_seconds(kind, bytes, counters.group_calls.at(group), p, link);
    }
    t.comm_s[kind] += s;
    t.comm_total_s += s;
  }
  split_halo(counters, mesh, machine, scale, options.overlap_halo, t);
  t.halo_steps_s = t.halo_exposed_s;
  // A free start's packing is in its finish's bytes: the finish reads and writes the whole block
  // (forward: the start assembles it, the finish places the strips; adjoint: the finish folds).
  for (const auto& [kind, calls] : counters.op_calls)
    if (kind.traits().halo && !kind.traits().free) {
      const auto bytes = counters.op_bytes.find(kind);
      t.halo_steps_s += static_cast<double>(calls) * machine.op_overhead_s;
      if (bytes != counters.op_bytes.end())
        t.halo_steps_s += static_cast<double>(bytes->second) / machine.elementwise_rate(kind);
    }
  t.total_s = t.compute_s + t.comm_total_s - t.halo_hidden_s;
  t.overlapped_s = std::max(t.compute_s, t.comm_total_s);
  return t;
}

}  // namespace mtk::cost
