#include <mtk/base/error.hpp>
#include <mtk/config/known_keys.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/config/schema.hpp>

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

// A machine's scalars and a link level's, each declared once with its range: rates at least one
// per second, times and counts at least 0, every number finite.
const config::Schema<cost::Machine>& machine_schema() {
  using M = cost::Machine;
  static const config::Schema<M> schema = [] {
    config::Schema<M> s;
    s.text("name", &M::name, "what the machine is (default: the file's name)")
        .real("matmul_flops", &M::matmul_flops, 1, kMaxDouble,
              "FLOP/s per processor of float32 matrix products")
        .real("matmul_bf16_flops", &M::matmul_bf16_flops, 0, kMaxDouble,
              "FLOP/s per processor in bfloat16 (0: none)")
        .real("elementwise_bytes", &M::elementwise_bytes, 1, kMaxDouble,
              "bytes/s per processor read and written by kernel steps")
        .real("op_overhead_s", &M::op_overhead_s, 0, kMaxDouble,
              "seconds of fixed cost per kernel step");
    return s;
  }();
  return schema;
}

const config::Schema<cost::LinkLevel>& link_schema() {
  using L = cost::LinkLevel;
  static const config::Schema<L> schema = [] {
    config::Schema<L> s;
    s.integer("span", &L::span, 0, kMaxInt, "groups within this many consecutive ranks (0: any)")
        .integer("stride", &L::stride, 0, kMaxInt, "> 1: one-dim groups of this rank stride")
        .real("bandwidth", &L::bandwidth, 1, kMaxDouble,
              "bytes/s one processor sends and receives at once")
        .real("latency", &L::latency, 0, kMaxDouble, "seconds per message step")
        .integer("group", &L::sizes_group, 0, kMaxInt,
                 "the group size allreduce_sizes were measured on")
        .boolean("halo_by_copies", &L::halo_by_copies,
                 "neighbour exchanges through shared memory (the cores' own copies)");
    return s;
  }();
  return schema;
}

// Reads the fields of `schema` under `prefix` ("" or "links.node.") into `s`; the `required`
// (real) keys must be present. Every value is checked as the schema says, naming the file and the
// key.
template <class S>
void read_fields(const config::Schema<S>& schema, const Config& config, const std::string& prefix,
                 const std::vector<std::string>& required, S& s) {
  for (const auto& f : schema.fields()) {
    const std::string key = prefix + f.spec.key;
    if (!config.has(key) &&
        std::find(required.begin(), required.end(), f.spec.key) != required.end())
      fail("mtk::machine_from_config",
           cat(config.origin(), ": key '", key,
               "' is missing; expected a finite number >= ", f.spec.real_lo));
    f.set(s, config::read_value(config, key, f.spec, f.get(s)));
  }
}

// The keys a section may hold: the schema's and `sections`.
template <class S>
std::vector<std::string> keys_with(const config::Schema<S>& schema,
                                   std::vector<std::string> sections) {
  std::vector<std::string> keys = schema.keys();
  keys.insert(keys.end(), sections.begin(), sections.end());
  return keys;
}

}  // namespace

const std::vector<std::string>& machine_step_kinds() {
  return cost::step_kind_names();
}

cost::Machine machine_from_config(const Config& config) {
  const char* where = "mtk::machine_from_config";
  reject_unknown_keys(
      config, "",
      keys_with(machine_schema(),
                {"matmul_sizes", "matmul_narrow", "elementwise_by_kind", "memory_bytes", "links"}));
  // Every number finite and in range, read with its key: a NaN or an infinity would make every
  // predicted time nan or 0, a memory size beyond 64 bits wrap.
  cost::Machine m;
  read_fields(machine_schema(), config, "", {"matmul_flops", "elementwise_bytes"}, m);
  if (m.name.empty())
    m.name = config.origin();
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
      m.elementwise_by_kind[cost::KindKey::named(kind)] =
          config.get_positive("elementwise_by_kind." + kind);
    }
  }
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
    reject_unknown_keys(config, k, keys_with(link_schema(), {"allreduce_sizes", "halo_sizes"}));
    cost::LinkLevel l;
    read_fields(link_schema(), config, k + ".", {"bandwidth"}, l);
    if (config.has(k + ".allreduce_sizes"))
      l.allreduce_sizes = read_points<cost::CollectivePoint>(config, k + ".allreduce_sizes",
                                                             "bytes", "seconds", true);
    if (config.has(k + ".halo_sizes"))
      l.halo_sizes =
          read_points<cost::CollectivePoint>(config, k + ".halo_sizes", "bytes", "seconds", true);
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
      s << "  " << kind.name() << ": " << num(rate) << "\n";
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
