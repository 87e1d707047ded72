#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/impl/yaml_keys.hpp>
#include <mtk/files/files.hpp>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <sys/stat.h>

namespace mtk {

struct Config::Impl {
  YAML::Node root;
  std::string origin;
  std::vector<std::string> overridden;  // keys apply_override() set

  // Where the value at `key` came from, for messages: "cfg.yaml" or "cfg.yaml with --set k=v".
  std::string from(const std::string& key) const {
    for (auto it = overridden.rbegin(); it != overridden.rend(); ++it)
      if (key == *it || key.rfind(*it + ".", 0) == 0)
        return origin + " with --set " + *it;
    return origin;
  }
};

namespace {

using config::scalar_text;
using config::split_key;

// Walks to `key`; returns an undefined node when any part is missing.
YAML::Node find(const YAML::Node& root, const std::string& key) {
  YAML::Node node = YAML::Clone(root);
  for (const auto& part : split_key(key)) {
    if (!node.IsMap())
      return YAML::Node(YAML::NodeType::Undefined);
    YAML::Node child = node[part];
    if (!child.IsDefined())
      return YAML::Node(YAML::NodeType::Undefined);
    node = child;
  }
  return node;
}

// A scalar read as a double (false: not a scalar, or not a number).
bool scalar_double(const YAML::Node& n, double& v) {
  if (!n.IsScalar())
    return false;
  try {
    v = n.as<double>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

template <class T>
T convert(const YAML::Node& node, const std::string& origin, const std::string& key,
          const char* type) {
  if (!node.IsDefined() || node.IsNull())
    fail("mtk::Config", cat(origin, ": key '", key, "' is missing"));
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    fail("mtk::Config",
         cat(origin, ": key '", key, "' is not ", type, " (value: ", YAML::Dump(node), ")"));
  }
}

std::string map_to_pairs(const YAML::Node& node, const std::string& origin,
                         const std::string& key) {
  if (node.IsScalar())
    return node.as<std::string>();
  if (!node.IsMap())
    fail("mtk::Config",
         cat(origin, ": key '", key, "' must be a map or a \"name:value;...\" string"));
  std::string text;
  for (const auto& item : node)
    text += item.first.as<std::string>() + ":" + item.second.as<std::string>() + ";";
  return text;
}

}  // namespace

Config Config::from_string(const std::string& text, const std::string& origin) {
  Config c;
  c.impl_ = std::make_shared<Impl>();
  c.impl_->origin = origin;
  try {
    c.impl_->root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail("mtk::Config", cat(origin, ": invalid YAML at line ", e.mark.line + 1, ": ", e.msg));
  }
  if (c.impl_->root.IsNull())
    c.impl_->root = YAML::Node(YAML::NodeType::Map);
  if (!c.impl_->root.IsMap())
    fail("mtk::Config", cat(origin, ": the document is not a YAML map"));
  config::check_yaml_keys(c.impl_->root, origin, false);
  c.impl_->root.SetStyle(YAML::EmitterStyle::Block);  // "{}" too: sections added print as blocks
  return c;
}

Config Config::from_file(const std::string& path) {
  const char* where = "mtk::Config::from_file";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    fail(where, cat("cannot read the config file '", path, "': ", std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    fail(where, cat("the config file '", path, "' is a directory; pass a YAML file"));
  return from_string(read_whole_file(path, where), path);
}

bool Config::has(const std::string& key) const {
  auto n = find(impl_->root, key);
  return n.IsDefined() && !n.IsNull();
}

std::string Config::get_string(const std::string& key) const {
  return convert<std::string>(find(impl_->root, key), impl_->from(key), key, "a string");
}
std::int64_t Config::get_int(const std::string& key) const {
  return convert<std::int64_t>(find(impl_->root, key), impl_->from(key), key, "an integer");
}
double Config::get_double(const std::string& key) const {
  const YAML::Node n = find(impl_->root, key);
  const double v = convert<double>(n, impl_->from(key), key, "a number");
  if (!std::isfinite(v))  // .nan, .inf
    fail("mtk::Config",
         cat(impl_->from(key), ": ", key, " = ", scalar_text(n), " is not a finite number"));
  return v;
}
bool Config::get_bool(const std::string& key) const {
  return convert<bool>(find(impl_->root, key), impl_->from(key), key, "a boolean");
}
std::string Config::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
std::int64_t Config::get_int(const std::string& key, std::int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double Config::get_double(const std::string& key, double fallback) const {
  return has(key) ? get_double(key) : fallback;
}
bool Config::get_bool(const std::string& key, bool fallback) const {
  return has(key) ? get_bool(key) : fallback;
}

namespace {

// The node at `key` for a checked getter: undefined when absent; an error when present as null.
YAML::Node present(const YAML::Node& root, const std::string& origin, const std::string& key,
                   const char* expected) {
  YAML::Node n = find(root, key);
  if (n.IsDefined() && n.IsNull())
    fail("mtk::Config", cat(origin, ": key '", key, "' has no value; expected ", expected));
  return n;
}

}  // namespace

std::int64_t Config::get_int(const std::string& key, std::int64_t fallback, std::int64_t lo,
                             std::int64_t hi) const {
  const std::string range = cat("an integer in [", lo, ", ", hi, "]");
  const YAML::Node n = present(impl_->root, impl_->from(key), key, range.c_str());
  if (!n.IsDefined())
    return fallback;
  std::int64_t v = 0;
  bool ok = n.IsScalar();
  if (ok) {
    try {
      v = n.as<std::int64_t>();
    } catch (const YAML::Exception&) {
      ok = false;  // not an integer, or beyond 64 bits
    }
  }
  if (!ok || v < lo || v > hi)
    fail("mtk::Config", cat(impl_->from(key), ": ", key, " = ", scalar_text(n), " is not ", range));
  return v;
}

double Config::get_double(const std::string& key, double fallback, double lo, double hi) const {
  const std::string range = hi == std::numeric_limits<double>::max()
                                ? cat("a finite number >= ", lo)
                                : cat("a number in [", lo, ", ", hi, "]");
  const YAML::Node n = present(impl_->root, impl_->from(key), key, range.c_str());
  if (!n.IsDefined())
    return fallback;
  double v = 0;
  const bool ok = scalar_double(n, v);
  if (!ok || !(v >= lo && v <= hi))  // NaN fails too
    fail("mtk::Config", cat(impl_->from(key), ": ", key, " = ", scalar_text(n), " is not ", range));
  return v;
}

double Config::get_positive(const std::string& key) const {
  if (!has(key))
    fail("mtk::Config", cat(impl_->from(key), ": key '", key,
                            "' is missing; expected a finite "
                            "number > 0"));
  return get_positive(key, 0.0);
}

double Config::get_positive(const std::string& key, double fallback) const {
  const char* expected = "a finite number > 0";
  const YAML::Node n = present(impl_->root, impl_->from(key), key, expected);
  if (!n.IsDefined())
    return fallback;
  double v = 0;
  const bool ok = scalar_double(n, v);
  if (!ok || !std::isfinite(v) || !(v > 0))
    fail("mtk::Config",
         cat(impl_->from(key), ": ", key, " = ", scalar_text(n), " is not ", expected));
  return v;
}

std::int64_t Config::get_whole(const std::string& key, std::int64_t fallback, std::int64_t lo,
                               std::int64_t hi) const {
  const std::string range = hi == std::numeric_limits<std::int64_t>::max()
                                ? cat("a whole number >= ", lo)
                                : cat("a whole number in [", lo, ", ", hi, "]");
  const YAML::Node n = present(impl_->root, impl_->from(key), key, range.c_str());
  if (!n.IsDefined())
    return fallback;
  std::int64_t v = 0;
  bool ok = n.IsScalar();
  if (ok) {
    try {
      v = n.as<std::int64_t>();
    } catch (const YAML::Exception&) {
      try {  // "4.0e9", "4e+09": whole, finite and inside int64 before the conversion
        ok = config::whole_int64(n.as<double>(), v);
      } catch (const YAML::Exception&) {
        ok = false;
      }
    }
  }
  if (!ok || v < lo || v > hi)
    fail("mtk::Config", cat(impl_->from(key), ": ", key, " = ", scalar_text(n), " is not ", range));
  return v;
}

bool Config::get_bool_checked(const std::string& key, bool fallback) const {
  const YAML::Node n = present(impl_->root, impl_->from(key), key, "true or false");
  if (!n.IsDefined())
    return fallback;
  try {
    if (n.IsScalar())
      return n.as<bool>();
  } catch (const YAML::Exception&) {
  }
  fail("mtk::Config",
       cat(impl_->from(key), ": ", key, " = ", scalar_text(n), " is not true or false"));
}

std::string Config::get_string(const std::string& key, const std::string& fallback,
                               const std::vector<std::string>& allowed) const {
  std::string list;
  for (const auto& a : allowed)
    list += (list.empty() ? "" : ", ") + a;
  const std::string expected = allowed.empty() ? "a non-empty string" : "one of " + list;
  const YAML::Node n = present(impl_->root, impl_->from(key), key, expected.c_str());
  if (!n.IsDefined())
    return fallback;
  const std::string v = n.IsScalar() ? n.Scalar() : "";
  if (!n.IsScalar() || v.empty() ||
      (!allowed.empty() && std::find(allowed.begin(), allowed.end(), v) == allowed.end()))
    fail("mtk::Config",
         cat(impl_->from(key), ": ", key, " = '", scalar_text(n), "' is not ", expected));
  return v;
}

void Config::require_section(const std::string& key) const {
  const YAML::Node n = find(impl_->root, key);
  if (n.IsDefined() && !n.IsNull() && !n.IsMap())
    fail("mtk::Config", cat(impl_->from(key), ": '", key,
                            "' must be a section (a map of keys), not ", scalar_text(n)));
}

std::vector<std::string> Config::keys(const std::string& key) const {
  std::vector<std::string> out;
  auto n = key.empty() ? impl_->root : find(impl_->root, key);
  if (n.IsMap())
    for (const auto& item : n)
      out.push_back(item.first.as<std::string>());
  return out;
}

MeshShape Config::mesh_shape(const std::string& key) const {
  auto n = find(impl_->root, key);
  if (!n.IsDefined())
    fail("mtk::Config::mesh_shape", cat(impl_->origin, ": key '", key, "' is missing"));
  try {
    return MeshShape::parse(map_to_pairs(n, impl_->origin, key));
  } catch (const Error& e) {
    fail("mtk::Config::mesh_shape", cat(impl_->origin, ": key '", key, "': ", e.what()));
  }
}

LayoutRules Config::layout_rules(const std::string& key) const {
  auto n = find(impl_->root, key);
  if (!n.IsDefined() || n.IsNull())
    return LayoutRules();
  try {
    return LayoutRules::parse(map_to_pairs(n, impl_->origin, key));
  } catch (const Error& e) {
    fail("mtk::Config::layout_rules", cat(impl_->origin, ": key '", key, "': ", e.what()));
  }
}

namespace {

// Sets `key` of `root` (creating parent sections) to `value`; `origin` names the file in errors.
void put(YAML::Node root, const std::string& key, const YAML::Node& value,
         const std::string& origin, const char* where) {
  auto parts = split_key(key);
  if (parts.empty())
    fail(where, cat("empty key for value '", scalar_text(value), "'"));
  YAML::Node node = root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = node[parts[i]];
    if (child.IsDefined() && !child.IsNull() && !child.IsMap())
      fail(where, cat(origin, ": cannot set '", key, "': '", parts[i], "' is not a section"));
    if (!child.IsDefined() || child.IsNull())
      node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    node.reset(node[parts[i]]);
  }
  node[parts.back()] = value;
}

}  // namespace

void Config::set(const std::string& key, const std::string& value) {
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception&) {
    parsed = YAML::Node(value);
  }
  config::check_yaml_keys(parsed, cat(impl_->origin, " (the value set for '", key, "')"), false,
                          key);
  put(impl_->root, key, parsed, impl_->origin, "mtk::Config::set");
}

void Config::set_scalar(const std::string& key, const std::string& text) {
  put(impl_->root, key, YAML::Node(text), impl_->origin, "mtk::Config::set_scalar");
}

void Config::erase(const std::string& key) {
  auto parts = split_key(key);
  if (parts.empty())
    return;
  YAML::Node node = impl_->root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const YAML::Node child = static_cast<const YAML::Node&>(node)[parts[i]];  // never creates
    if (!child.IsMap())
      return;
    node.reset(child);
  }
  if (node.IsMap())
    node.remove(parts.back());
}

void Config::copy_from(const Config& from, const std::string& key) {
  const YAML::Node n = find(from.impl_->root, key);
  if (n.IsDefined())
    put(impl_->root, key, YAML::Clone(n), impl_->origin, "mtk::Config::copy_from");
}

void Config::apply_override(const std::string& assignment) {
  const char* where = "mtk::Config::apply_override";
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    fail(where, cat("'", assignment, "' is not of the form section.key=value"));
  const std::string key = assignment.substr(0, eq), value = assignment.substr(eq + 1);
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception&) {
    parsed = YAML::Node(value);
  }
  // An empty value would silently mean "the default"; quote it ("") for an empty string.
  if (value.find_first_not_of(" \t") == std::string::npos || parsed.IsNull())
    fail(where, cat("'", assignment, "' gives '", key, "' no value; write ", key,
                    "=VALUE (\"\" for an empty string)"));
  const YAML::Node existing = find(impl_->root, key);
  if (existing.IsMap() && !parsed.IsMap()) {
    std::string keys, first = "KEY";
    for (const auto& item : existing)
      keys += (keys.empty() ? (first = item.first.as<std::string>(), "") : ", ") +
              item.first.as<std::string>();
    fail(where, cat("'", assignment, "' would replace the section '", key, "' (", keys,
                    ") with a value; set one of its keys, e.g. ", key, ".", first, "=...",
                    key == "mesh" || key == "layout" ? cat(", or use --", key) : std::string()));
  }
  set(key, value);
  impl_->overridden.push_back(key);
}

namespace config {

bool whole_int64(double v, std::int64_t& out) {
  // [-2^63, 2^63): both ends are exact doubles; NaN fails every comparison.
  constexpr double two63 = 9223372036854775808.0;
  if (!(v >= -two63 && v < two63) || v != std::floor(v))
    return false;
  out = static_cast<std::int64_t>(v);
  return true;
}

}  // namespace config

std::string Config::dump() const {
  return YAML::Dump(impl_->root) + "\n";
}
const std::string& Config::origin() const {
  return impl_->origin;
}

}  // namespace mtk
