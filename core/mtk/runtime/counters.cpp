#include <mtk/runtime/counters.hpp>

#include <algorithm>
#include <cmath>
#include <tuple>

namespace mtk {

double Counters::total_flops() const {
  double t = 0;
  for (const auto& [k, v] : flops)
    t += v;
  return t;
}

GemmClass GemmClass::of_flops(double flops_each) {
  GemmClass c;
  c.log2_flops = static_cast<int>(std::floor(std::log2(flops_each)));
  return c;
}

GemmClass GemmClass::of(std::int64_t m, std::int64_t n, std::int64_t k) {
  GemmClass c =
      of_flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  const std::int64_t smallest = std::min({m, n, k});
  if (smallest < kNarrow) {
    c.narrow = smallest;
    c.inner = k == smallest && m > k && n > k;  // a tie with M or N: the result's dim
  }
  return c;
}

bool GemmClass::operator<(const GemmClass& o) const {
  return std::tie(log2_flops, narrow, inner) < std::tie(o.log2_flops, o.narrow, o.inner);
}

bool GemmClass::operator==(const GemmClass& o) const {
  return log2_flops == o.log2_flops && narrow == o.narrow && inner == o.inner;
}

double Counters::flops_of(FlopClass c) const {
  const auto it = flops.find(c);
  return it == flops.end() ? 0.0 : it->second;
}

const char* to_string(Collective c) {
  switch (c) {
    case Collective::allreduce:
      return "allreduce";
    case Collective::allconcat:
      return "allconcat";
    case Collective::alltoall:
      return "alltoall";
    case Collective::halo:
      return "halo";
    case Collective::reduce_scatter:
      return "reduce_scatter";
  }
  return "?";
}

std::int64_t Counters::total_comm_bytes() const {
  std::int64_t t = 0;
  for (const auto& [k, v] : comm_bytes)
    t += v;
  return t;
}

}  // namespace mtk
