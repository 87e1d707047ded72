#include <mtk/base/error.hpp>
#include <mtk/config/known_keys.hpp>
#include <mtk/config/machine_config.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>

namespace mtk {

namespace {

constexpr double kMaxDouble = std::numeric_limits<double>::max();
constexpr std::int64_t kMaxInt = std::numeric_limits<std::int32_t>::max();

// The points under `key` (entries {x_name: .., y_name: ..} in any order), sorted by x: x finite
// and > 0; y finite and > 0, or >= 0 where `y_may_be_zero` (seconds).
template <class Point>
std::vector<Point> read_points(const Config& config, const std::string& key,
                               const std::string& x_name, const std::string& y_name,
                               bool y_may_be_zero = false) {
  std::vector<Point> points;
  config.require_section(key);
  for (const auto& name : config.keys(key)) {
    const std::string k = key + "." + name;
    config.require_section(k);
    reject_unknown_keys(config, k, {x_name, y_name});
    const double x = config.get_positive(k + "." + x_name);
    const std::string y_key = k + "." + y_name;
    double y = 0;
    if (y_may_be_zero) {
      config.get_double(y_key);  // present, a number, finite
      y = config.get_double(y_key, 0.0, 0.0, kMaxDouble);
    } else {
      y = config.get_positive(y_key);
    }
    points.push_back({x, y});
  }
  std::sort(points.begin(), points.end(), [](const Point& a, const Point& b) {
    [[maybe_unused]] const auto& [ax, ay] = a;
    [[maybe_unused]] const auto& [bx, by] = b;
    return ax < bx;
  });
  return points;
}

}  // namespace

const std::vector<std::string>& machine_step_kinds() {
  // Every make_op_kind name in core/ (tests/config/test_strict_config.cpp checks this list
  // against the sources): a kind added there is added here.
  // clang-format off
  static const std::vector<std::string> kinds = {
      "adafactor_apply", "adafactor_second_moment", "adam_update", "alias", "allgather_start",
      "allgather_wait", "allreduce", "allreduce_start", "allreduce_wait", "assign", "binary",
      "broadcast", "cast", "compare", "concat", "constant", "cumsum", "einsum",
      "einsum_accumulate", "extract_patches", "fold_patches", "gather", "halo_copy",
      "halo_exchange", "halo_reduce", "halo_start", "layer_norm", "layer_norm_grad", "load_bf16",
      "log_softmax", "one_hot", "pad", "placeholder", "random_normal", "random_uniform", "range",
      "reduce", "reduce_scatter", "relayout", "reshape", "scatter_add", "scatter_add_into",
      "shift", "slice", "softmax", "softmax_cross_entropy", "softmax_cross_entropy_grad",
      "softmax_grad", "stop_gradient", "store_bf16", "top_1", "unary", "variable", "where",
      "zero_gather", "zero_view"};
  // clang-format on
  return kinds;
}

cost::Machine machine_from_config(const Config& config) {
  const char* where = "mtk::machine_from_config";
  reject_unknown_keys(
      config, "",
      {"name", "matmul_flops", "matmul_bf16_flops", "matmul_sizes", "matmul_narrow",
       "elementwise_bytes", "elementwise_by_kind", "op_overhead_s", "memory_bytes", "links"});
  // Every number finite and in range, read with its key: a NaN or an infinity would make every
  // predicted time nan or 0, a memory size beyond 64 bits wrap.
  cost::Machine m;
  m.name = config.get_string("name", config.origin());
  m.matmul_flops = config.get_positive("matmul_flops");
  m.matmul_bf16_flops = config.get_double("matmul_bf16_flops", 0.0, 0.0, kMaxDouble);
  m.elementwise_bytes = config.get_positive("elementwise_bytes");
  // Bytes per processor, 0: unknown. Written as "4e+09" by machine_to_yaml.
  m.memory_bytes = config.get_whole("memory_bytes", 0, 0, std::numeric_limits<std::int64_t>::max());
  if (config.has("elementwise_by_kind")) {
    config.require_section("elementwise_by_kind");
    const auto& known = machine_step_kinds();
    for (const auto& kind : config.keys("elementwise_by_kind")) {
      if (std::find(known.begin(), known.end(), kind) == known.end()) {
        const std::string near = config::nearest_name(kind, known);
        fail(where, cat(config.origin(), ": elementwise_by_kind names the step kind '", kind,
                        "', which no step has (its rate would never be used)",
                        near.empty() ? std::string() : cat("; did you mean '", near, "'?"),
                        " (known: ", config::joined(known), ")"));
      }
      m.elementwise_by_kind[kind] = config.get_positive("elementwise_by_kind." + kind);
    }
  }
  m.op_overhead_s = config.get_double("op_overhead_s", 0.0, 0.0, kMaxDouble);
  if (config.has("matmul_sizes"))
    m.matmul_sizes = read_points<cost::MatmulPoint>(config, "matmul_sizes", "gemm_flops", "flops");
  if (config.has("matmul_narrow")) {
    config.require_section("matmul_narrow");
    reject_unknown_keys(config, "matmul_narrow", {"outer", "inner"});
    if (config.has("matmul_narrow.outer"))
      m.matmul_narrow_outer =
          read_points<cost::NarrowMatmulPoint>(config, "matmul_narrow.outer", "narrow", "flops");
    if (config.has("matmul_narrow.inner"))
      m.matmul_narrow_inner =
          read_points<cost::NarrowMatmulPoint>(config, "matmul_narrow.inner", "narrow", "flops");
  }
  if (!config.has("links"))
    fail(where, config.origin() + ": key 'links' is missing");
  config.require_section("links");
  for (const auto& level : config.keys("links")) {
    const std::string k = "links." + level;
    config.require_section(k);
    reject_unknown_keys(config, k,
                        {"span", "bandwidth", "latency", "stride", "group", "allreduce_sizes",
                         "halo_sizes", "halo_by_copies"});
    cost::LinkLevel l;
    l.span = config.get_int(k + ".span", 0, 0, kMaxInt);
    l.stride = config.get_int(k + ".stride", 0, 0, kMaxInt);
    l.bandwidth = config.get_positive(k + ".bandwidth");
    l.latency = config.get_double(k + ".latency", 0.0, 0.0, kMaxDouble);
    l.sizes_group = config.get_int(k + ".group", 0, 0, kMaxInt);
    if (config.has(k + ".allreduce_sizes"))
      l.allreduce_sizes = read_points<cost::CollectivePoint>(config, k + ".allreduce_sizes",
                                                             "bytes", "seconds", true);
    if (config.has(k + ".halo_sizes"))
      l.halo_sizes =
          read_points<cost::CollectivePoint>(config, k + ".halo_sizes", "bytes", "seconds", true);
    l.halo_by_copies = config.get_bool_checked(k + ".halo_by_copies", false);
    m.links.push_back(l);
  }
  try {
    m.validate();
  } catch (const Error& e) {
    fail(where, config.origin() + ": " + e.what());
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
