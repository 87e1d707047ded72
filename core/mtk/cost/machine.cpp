#include <mtk/base/error.hpp>
#include <mtk/cost/machine.hpp>

namespace mtk::cost {

void Machine::validate() const {
  const std::string where = "mtk::cost::Machine '" + name + "'";
  if (!(matmul_flops > 0))
    fail(where, cat("matmul_flops is ", matmul_flops, "; it must be > 0 (FLOP/s per processor)"));
  if (matmul_bf16_flops < 0)
    fail(where, cat("matmul_bf16_flops is ", matmul_bf16_flops, "; it must be >= 0"));
  if (!(elementwise_bytes > 0))
    fail(where, cat("elementwise_bytes is ", elementwise_bytes, "; it must be > 0 (bytes/s)"));
  if (memory_bytes < 0)
    fail(where, cat("memory_bytes is ", memory_bytes, "; it must be >= 0"));
  if (links.empty())
    fail(where, "no links: give at least one level {span, bandwidth, latency}");
  for (size_t i = 0; i < links.size(); ++i) {
    const LinkLevel& l = links[i];
    if (!(l.bandwidth > 0) || l.latency < 0 || l.span < 0)
      fail(where, cat("links[", i, "]: span ", l.span, ", bandwidth ", l.bandwidth, ", latency ",
                      l.latency, "; need span >= 0, bandwidth > 0, latency >= 0"));
    if (i > 0 && l.span != 0 && (links[i - 1].span == 0 || l.span <= links[i - 1].span))
      fail(where, cat("links[", i, "]: spans must increase, with 0 (any) last"));
  }
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

const LinkLevel& Machine::link_for(const MeshShape& mesh, const std::vector<int>& axes) const {
  const std::int64_t span = group_span(mesh, axes);
  for (const LinkLevel& l : links)
    if (l.span == 0 || span <= l.span)
      return l;
  return links.back();  // the widest level stands for anything larger
}

}  // namespace mtk::cost
