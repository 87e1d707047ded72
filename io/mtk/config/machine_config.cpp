#include <mtk/base/error.hpp>
#include <mtk/config/known_keys.hpp>
#include <mtk/config/machine_config.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace mtk {

namespace {

// The points under `key` (entries {x_name: .., y_name: ..} in any order), sorted by x.
template <class Point>
std::vector<Point> read_points(const Config& config, const std::string& key,
                               const std::string& x_name, const std::string& y_name) {
  std::vector<Point> points;
  for (const auto& name : config.keys(key)) {
    const std::string k = key + "." + name;
    reject_unknown_keys(config, k, {x_name, y_name});
    points.push_back({config.get_double(k + "." + x_name), config.get_double(k + "." + y_name)});
  }
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    [[maybe_unused]] const auto& [ax, ay] = a;
    [[maybe_unused]] const auto& [bx, by] = b;
    return ax < bx;
  });
  return points;
}

}  // namespace

cost::Machine machine_from_config(const Config& config) {
  reject_unknown_keys(
      config, "",
      {"name", "matmul_flops", "matmul_bf16_flops", "matmul_sizes", "matmul_narrow",
       "elementwise_bytes", "elementwise_by_kind", "op_overhead_s", "memory_bytes", "links"});
  cost::Machine m;
  m.name = config.get_string("name", config.origin());
  m.matmul_flops = config.get_double("matmul_flops");
  m.matmul_bf16_flops = config.get_double("matmul_bf16_flops", 0.0);
  m.elementwise_bytes = config.get_double("elementwise_bytes");
  m.memory_bytes = static_cast<std::int64_t>(config.get_double("memory_bytes", 0.0));
  if (config.has("elementwise_by_kind"))
    for (const auto& kind : config.keys("elementwise_by_kind"))
      m.elementwise_by_kind[kind] = config.get_double("elementwise_by_kind." + kind);
  m.op_overhead_s = config.get_double("op_overhead_s", 0.0);
  if (config.has("matmul_sizes"))
    m.matmul_sizes = read_points<cost::MatmulPoint>(config, "matmul_sizes", "gemm_flops", "flops");
  if (config.has("matmul_narrow")) {
    reject_unknown_keys(config, "matmul_narrow", {"outer", "inner"});
    if (config.has("matmul_narrow.outer"))
      m.matmul_narrow_outer =
          read_points<cost::NarrowMatmulPoint>(config, "matmul_narrow.outer", "narrow", "flops");
    if (config.has("matmul_narrow.inner"))
      m.matmul_narrow_inner =
          read_points<cost::NarrowMatmulPoint>(config, "matmul_narrow.inner", "narrow", "flops");
  }
  if (!config.has("links"))
    fail("mtk::machine_from_config", config.origin() + ": key 'links' is missing");
  for (const auto& level : config.keys("links")) {
    const std::string k = "links." + level;
    reject_unknown_keys(config, k,
                        {"span", "bandwidth", "latency", "stride", "group", "allreduce_sizes",
                         "halo_sizes", "halo_by_copies"});
    cost::LinkLevel l;
    l.span = config.get_int(k + ".span", 0);
    l.stride = config.get_int(k + ".stride", 0);
    l.bandwidth = config.get_double(k + ".bandwidth");
    l.latency = config.get_double(k + ".latency", 0.0);
    l.sizes_group = config.get_int(k + ".group", 0);
    if (config.has(k + ".allreduce_sizes"))
      l.allreduce_sizes =
          read_points<cost::CollectivePoint>(config, k + ".allreduce_sizes", "bytes", "seconds");
    if (config.has(k + ".halo_sizes"))
      l.halo_sizes =
          read_points<cost::CollectivePoint>(config, k + ".halo_sizes", "bytes", "seconds");
    l.halo_by_copies = config.get_bool_checked(k + ".halo_by_copies", false);
    m.links.push_back(l);
  }
  try {
    m.validate();
  } catch (const Error& e) {
    fail("mtk::machine_from_config", config.origin() + ": " + e.what());
  }
  return m;
}

cost::Machine machine_from_file(const std::string& path) {
  return machine_from_config(Config::from_file(path));
}

std::string machine_to_yaml(const cost::Machine& m, const std::string& comment) {
  std::ostringstream s;
  std::istringstream lines(comment);
  for (std::string line; std::getline(lines, line);)
    s << "# " << line << "\n";
  auto num = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return std::string(buf);
  };
  s << "name: \"" << m.name << "\"\n";
  s << "matmul_flops: " << num(m.matmul_flops) << "        # FLOP/s per processor, float32\n";
  s << "matmul_bf16_flops: " << num(m.matmul_bf16_flops) << "   # 0: no bf16\n";
  if (!m.matmul_sizes.empty()) {
    s << "matmul_sizes:   # FLOP/s by FLOPs of one gemm call (2 M N K), for small products\n";
    for (size_t i = 0; i < m.matmul_sizes.size(); ++i)
      s << "  size" << i << ": {gemm_flops: " << num(m.matmul_sizes[i].gemm_flops)
        << ", flops: " << num(m.matmul_sizes[i].flops) << "}\n";
  }
  if (!m.matmul_narrow_outer.empty() || !m.matmul_narrow_inner.empty()) {
    s << "matmul_narrow:   # FLOP/s of skinny gemm calls by their narrowest dim: outer "
         "[4096, 256] x [256, narrow],\n                 # inner [4096, narrow] x [narrow, 256]\n";
    for (const auto* pts : {&m.matmul_narrow_outer, &m.matmul_narrow_inner}) {
      if (pts->empty())
        continue;
      s << "  " << (pts == &m.matmul_narrow_outer ? "outer" : "inner") << ":\n";
      for (size_t i = 0; i < pts->size(); ++i)
        s << "    point" << i << ": {narrow: " << num((*pts)[i].narrow)
          << ", flops: " << num((*pts)[i].flops) << "}\n";
    }
  }
  s << "elementwise_bytes: " << num(m.elementwise_bytes)
    << "   # bytes/s per processor read + written by kernels\n";
  if (!m.elementwise_by_kind.empty()) {
    s << "elementwise_by_kind:   # bytes/s of the steps of one kind\n";
    for (const auto& [kind, rate] : m.elementwise_by_kind)
      s << "  " << kind << ": " << num(rate) << "\n";
  }
  s << "op_overhead_s: " << num(m.op_overhead_s) << "   # seconds per kernel step\n";
  s << "memory_bytes: " << num(static_cast<double>(m.memory_bytes)) << "\n";
  s << "links:   # a collective group uses the first level whose span (consecutive ranks) covers "
       "it; 0 = any;\n         # a one-dim group whose ranks lie `stride` apart takes that "
       "strided level first\n";
  for (size_t i = 0; i < m.links.size(); ++i) {
    const cost::LinkLevel& l = m.links[i];
    if (l.allreduce_sizes.empty() && l.halo_sizes.empty()) {
      s << "  level" << i << ": {span: " << l.span;
      if (l.stride != 0)
        s << ", stride: " << l.stride;
      s << ", bandwidth: " << num(l.bandwidth) << ", latency: " << num(l.latency) << "}\n";
      continue;
    }
    s << "  level" << i << ":\n    span: " << l.span << "\n";
    if (l.stride != 0)
      s << "    stride: " << l.stride << "\n";
    s << "    bandwidth: " << num(l.bandwidth) << "\n    latency: " << num(l.latency) << "\n";
    auto points = [&](const char* key, const char* what,
                      const std::vector<cost::CollectivePoint>& pts) {
      if (pts.empty())
        return;
      s << "    " << key << ":   # " << what << "\n";
      for (size_t j = 0; j < pts.size(); ++j)
        s << "      size" << j << ": {bytes: " << static_cast<long long>(pts[j].bytes)
          << ", seconds: " << num(pts[j].seconds) << "}\n";
    };
    if (!l.allreduce_sizes.empty())
      s << "    group: " << l.sizes_group
        << "   # allreduce_sizes were measured on groups of this many\n";
    points("allreduce_sizes", "seconds of one allreduce call by payload bytes per processor",
           l.allreduce_sizes);
    points("halo_sizes", "seconds of one neighbour exchange by the bytes of its two strips",
           l.halo_sizes);
    if (l.halo_by_copies)
      s << "    halo_by_copies: true   # through shared memory: the cores' own copies, never "
           "hidden\n";
  }
  return s.str();
}

}  // namespace mtk
