#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/files/files.hpp>

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace mtk {

struct Config::Impl {
  YAML::Node root;
  std::string origin;
};

namespace {

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, '.'))
    if (!part.empty())
      parts.push_back(part);
  return parts;
}

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
  return c;
}

Config Config::from_file(const std::string& path) {
  return from_string(read_whole_file(path, "mtk::Config::from_file"), path);
}

bool Config::has(const std::string& key) const {
  auto n = find(impl_->root, key);
  return n.IsDefined() && !n.IsNull();
}

std::string Config::get_string(const std::string& key) const {
  return convert<std::string>(find(impl_->root, key), impl_->origin, key, "a string");
}
std::int64_t Config::get_int(const std::string& key) const {
  return convert<std::int64_t>(find(impl_->root, key), impl_->origin, key, "an integer");
}
double Config::get_double(const std::string& key) const {
  return convert<double>(find(impl_->root, key), impl_->origin, key, "a number");
}
bool Config::get_bool(const std::string& key) const {
  return convert<bool>(find(impl_->root, key), impl_->origin, key, "a boolean");
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

void Config::set(const std::string& key, const std::string& value) {
  auto parts = split_key(key);
  if (parts.empty())
    fail("mtk::Config::set", cat("empty key for value '", value, "'"));
  YAML::Node parsed;
  try {
    parsed = YAML::Load(value);
  } catch (const YAML::Exception&) {
    parsed = YAML::Node(value);
  }
  YAML::Node node = impl_->root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = node[parts[i]];
    if (child.IsDefined() && !child.IsNull() && !child.IsMap())
      fail("mtk::Config::set",
           cat(impl_->origin, ": cannot set '", key, "': '", parts[i], "' is not a section"));
    if (!child.IsDefined() || child.IsNull())
      node[parts[i]] = YAML::Node(YAML::NodeType::Map);
    node.reset(node[parts[i]]);
  }
  node[parts.back()] = parsed;
}

void Config::apply_override(const std::string& assignment) {
  auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("mtk::Config::apply_override",
         cat("'", assignment, "' is not of the form section.key=value"));
  set(assignment.substr(0, eq), assignment.substr(eq + 1));
}

std::string Config::dump() const {
  return YAML::Dump(impl_->root) + "\n";
}
const std::string& Config::origin() const {
  return impl_->origin;
}

}  // namespace mtk
