#include <mtk/base/error.hpp>
#include <mtk/cost/machine.hpp>

#include <algorithm>
#include <cmath>

namespace mtk::cost {

void Machine::validate() const {
  const std::string where = "mtk::cost::Machine '" + name + "'";
  if (!(matmul_flops > 0))
    fail(where, cat("matmul_flops is ", matmul_flops, "; it must be > 0 (FLOP/s per processor)"));
  if (matmul_bf16_flops < 0)
    fail(where, cat("matmul_bf16_flops is ", matmul_bf16_flops, "; it must be >= 0"));
  if (!(elementwise_bytes > 0))
    fail(where, cat("elementwise_bytes is ", elementwise_bytes, "; it must be > 0 (bytes/s)"));
  for (const auto& [kind, rate] : elementwise_by_kind)
    if (!(rate > 0))
      fail(where,
           cat("elementwise_by_kind.", kind.name(), " is ", rate, "; it must be > 0 (bytes/s)"));
  if (memory_bytes < 0)
    fail(where, cat("memory_bytes is ", memory_bytes, "; it must be >= 0"));
  if (op_overhead_s < 0)
    fail(where, cat("op_overhead_s is ", op_overhead_s, "; it must be >= 0 (seconds per step)"));
  for (size_t i = 0; i < matmul_sizes.size(); ++i) {
    const MatmulPoint& p = matmul_sizes[i];
    if (!(p.gemm_flops > 0) || !(p.flops > 0))
      fail(where, cat("matmul_sizes[", i, "]: gemm_flops ", p.gemm_flops, ", flops ", p.flops,
                      "; both must be > 0"));
    if (i > 0 && !(p.gemm_flops > matmul_sizes[i - 1].gemm_flops))
      fail(where, cat("matmul_sizes[", i, "]: gemm_flops ", p.gemm_flops,
                      " must be larger than the previous size's ", matmul_sizes[i - 1].gemm_flops));
  }
  for (const auto* pts : {&matmul_narrow_outer, &matmul_narrow_inner})
    for (size_t i = 0; i < pts->size(); ++i) {
      const char* key = pts == &matmul_narrow_outer ? "matmul_narrow.outer" : "matmul_narrow.inner";
      const NarrowMatmulPoint& p = (*pts)[i];
      if (!(p.narrow > 0) || !(p.flops > 0))
        fail(where,
             cat(key, "[", i, "]: narrow ", p.narrow, ", flops ", p.flops, "; both must be > 0"));
      if (i > 0 && !(p.narrow > (*pts)[i - 1].narrow))
        fail(where, cat(key, "[", i, "]: narrow ", p.narrow,
                        " must be larger than the previous point's ", (*pts)[i - 1].narrow));
    }
  if (links.empty())
    fail(where, "no links: give at least one level {span, bandwidth, latency}");
  // Collective times measured by size: positive, increasing sizes.
  auto check_points = [&](const std::string& key, const std::vector<CollectivePoint>& pts) {
    for (size_t j = 0; j < pts.size(); ++j) {
      if (!(pts[j].bytes > 0) || !(pts[j].seconds >= 0))
        fail(where, cat(key, "[", j, "]: bytes ", pts[j].bytes, ", seconds ", pts[j].seconds,
                        "; need bytes > 0, seconds >= 0"));
      if (j > 0 && !(pts[j].bytes > pts[j - 1].bytes))
        fail(where, cat(key, "[", j, "]: bytes ", pts[j].bytes,
                        " must be larger than the previous point's ", pts[j - 1].bytes));
    }
  };
  const LinkLevel* prev = nullptr;  // the previous span level
  bool any_span_level = false;
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkLevel& l = links[i];
    if (!(l.bandwidth > 0) || l.latency < 0 || l.span < 0)
      fail(where, cat("links[", i, "]: span ", l.span, ", bandwidth ", l.bandwidth, ", latency ",
                      l.latency, "; need span >= 0, bandwidth > 0, latency >= 0"));
    if (!l.allreduce_sizes.empty() && l.sizes_group < 2)
      fail(where, cat("links[", i, "]: allreduce_sizes need the group size they were measured on ",
                      "(group >= 2), got ", l.sizes_group));
    check_points(cat("links[", i, "].allreduce_sizes"), l.allreduce_sizes);
    check_points(cat("links[", i, "].halo_sizes"), l.halo_sizes);
    if (l.stride != 0) {
      if (l.stride < 2)
        fail(where,
             cat("links[", i, "]: stride ", l.stride, "; a strided level needs stride >= 2"));
      continue;
    }
    if (prev && l.span != 0 && (prev->span == 0 || l.span <= prev->span))
      fail(where, cat("links[", i, "]: spans must increase, with 0 (any) last"));
    prev = &l;
    any_span_level = true;
  }
  if (!any_span_level)
    fail(where, "only strided links: give at least one level without a stride");
}

namespace {

// Seconds at `bytes` from points measured by size: the first point's time below it, linear in
// log(bytes) between points, and beyond the last its time plus the extra bytes at `rate` B/s.
double interpolate_seconds(const std::vector<CollectivePoint>& pts, double bytes, double rate) {
  if (bytes <= pts.front().bytes)
    return pts.front().seconds;
  if (bytes >= pts.back().bytes)
    return pts.back().seconds + (bytes - pts.back().bytes) / rate;
  size_t i = 1;
  while (pts[i].bytes < bytes)
    ++i;
  const CollectivePoint &lo = pts[i - 1], &hi = pts[i];
  const double w = std::log(bytes / lo.bytes) / std::log(hi.bytes / lo.bytes);
  return (1 - w) * lo.seconds + w * hi.seconds;
}

}  // namespace

double LinkLevel::measured_allreduce_seconds(double bytes, std::int64_t p) const {
  if (allreduce_sizes.empty() || p != sizes_group)
    return -1;
  // Beyond the last point: the ring's bandwidth term, 2 (p - 1) / p bytes per byte.
  const double P = static_cast<double>(p);
  return interpolate_seconds(allreduce_sizes, bytes, P * bandwidth / (2 * (P - 1)));
}

double LinkLevel::measured_halo_seconds(double bytes) const {
  return halo_sizes.empty() ? -1 : interpolate_seconds(halo_sizes, bytes, bandwidth);
}

double Machine::elementwise_rate(const KindKey& kind) const {
  const auto it = elementwise_by_kind.find(kind);
  return it != elementwise_by_kind.end() ? it->second : elementwise_bytes;
}

double Machine::matmul_rate(double gemm_flops) const {
  if (matmul_sizes.empty())
    return matmul_flops;
  if (gemm_flops <= matmul_sizes.front().gemm_flops)
    return matmul_sizes.front().flops;
  if (gemm_flops >= matmul_sizes.back().gemm_flops)
    return matmul_sizes.back().flops;
  size_t i = 1;
  while (matmul_sizes[i].gemm_flops < gemm_flops)
    ++i;
  const MatmulPoint &lo = matmul_sizes[i - 1], &hi = matmul_sizes[i];
  const double w = std::log(gemm_flops / lo.gemm_flops) / std::log(hi.gemm_flops / lo.gemm_flops);
  return std::exp((1 - w) * std::log(lo.flops) + w * std::log(hi.flops));
}

double Machine::matmul_rate(double gemm_flops, std::int64_t narrow, bool inner) const {
  const double rate = matmul_rate(gemm_flops);
  const std::vector<NarrowMatmulPoint>& pts = inner ? matmul_narrow_inner : matmul_narrow_outer;
  const double d = static_cast<double>(narrow);
  if (narrow <= 0 || pts.empty() || d > pts.back().narrow)
    return rate;
  if (d <= pts.front().narrow)
    return std::min(rate, pts.front().flops);
  size_t i = 1;
  while (pts[i].narrow < d)
    ++i;
  const NarrowMatmulPoint &lo = pts[i - 1], &hi = pts[i];
  const double w = std::log(d / lo.narrow) / std::log(hi.narrow / lo.narrow);
  return std::min(rate, std::exp((1 - w) * std::log(lo.flops) + w * std::log(hi.flops)));
}

std::int64_t group_span(const MeshShape& mesh, const std::vector<int>& axes) {
  std::int64_t span = 1;
  for (int a : axes) {
    std::int64_t stride = 1;
    for (int b = a + 1; b < mesh.ndims(); ++b)
      stride *= mesh[b].size;
    span += (mesh[a].size - 1) * stride;
  }
  return span;
}

std::int64_t group_stride(const MeshShape& mesh, const std::vector<int>& axes) {
  if (axes.size() != 1)
    return 0;
  std::int64_t stride = 1;
  for (int b = axes[0] + 1; b < mesh.ndims(); ++b)
    stride *= mesh[b].size;
  return stride;
}

const LinkLevel& Machine::link_for(const MeshShape& mesh, const std::vector<int>& axes) const {
  const std::int64_t span = group_span(mesh, axes), stride = group_stride(mesh, axes);
  if (stride > 1)
    for (const LinkLevel& l : links)
      if (l.stride == stride && (l.span == 0 || span <= l.span))
        return l;
  const LinkLevel* widest = nullptr;
  for (const LinkLevel& l : links) {
    if (l.stride != 0)
      continue;
    if (l.span == 0 || span <= l.span)
      return l;
    widest = &l;
  }
  return *widest;  // the widest level stands for anything larger (validate(): one exists)
}

Machine reference_machine() {
  Machine m;
  m.name = "built-in default (pass --machine for real numbers)";
  m.matmul_flops = 1e11;
  m.elementwise_bytes = 1e10;
  m.links = {{0, 1e10, 1e-5}};
  return m;
}

}  // namespace mtk::cost
