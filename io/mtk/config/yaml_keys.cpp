#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/impl/yaml_keys.hpp>

#include <sstream>
#include <utility>

namespace mtk::config {

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> parts;
  std::stringstream ss(key);
  std::string part;
  while (std::getline(ss, part, '.'))
    if (!part.empty())
      parts.push_back(part);
  return parts;
}

std::string scalar_text(const YAML::Node& n) {
  std::string text = n.IsScalar() ? n.Scalar() : YAML::Dump(n);
  for (auto& c : text)
    if (c == '\n')
      c = ' ';
  return text;
}

namespace {

// Walks `node` (at `path`, "" for the top) and fails at the first map that names a key twice
// (yaml-cpp keeps both entries and its lookups find the first: the second would be silently
// ignored) or, unless `allow_dots`, has a key with a '.' (keys are addressed by dotted paths:
// "train.lr"; a key "lr.value" could never be read and would be silently ignored). `origin` names
// the file.
void check_keys(const YAML::Node& node, const std::string& path, const std::string& origin,
                bool allow_dots, int depth) {
  const char* where = "mtk::Config";
  if (depth > 64)
    fail(where, cat(origin, ": '", path, "' is nested more than 64 levels deep"));
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i)
      check_keys(node[i], cat(path, "[", i, "]"), origin, allow_dots, depth + 1);
    return;
  }
  if (!node.IsMap())
    return;
  auto line = [](const YAML::Node& n) {
    return n.Mark().is_null() ? std::string("?") : std::to_string(n.Mark().line + 1);
  };
  std::vector<std::pair<std::string, YAML::Node>> seen;
  for (const auto& item : node) {
    const std::string name = item.first.IsScalar() ? item.first.Scalar() : scalar_text(item.first);
    const std::string key = path.empty() ? name : path + "." + name;
    for (const auto& [other, first] : seen)
      if (other == name)
        fail(where, cat(origin, ": key '", key, "' is given twice, at line ", line(first),
                        " and at line ", line(item.first),
                        "; remove one (YAML would keep the first and silently ignore the other)"));
    if (!allow_dots && name.find('.') != std::string::npos) {
      // "train: {lr.value: 0.5}" -> "train: {lr: {value: 0.5}}"
      const auto parts = split_key(name);
      std::string nested;
      for (std::size_t i = 0; i < parts.size(); ++i)
        nested += parts[i] + (i + 1 < parts.size() ? ": {" : ": ");
      nested += item.second.IsScalar() ? scalar_text(item.second) : std::string("...");
      nested += std::string(parts.empty() ? 0 : parts.size() - 1, '}');
      fail(where, cat(origin, ": key '", name, "'", path.empty() ? "" : " in '" + path + "'",
                      " (line ", line(item.first),
                      ") has a '.' in its name; dots separate sections, so it would be ignored: "
                      "write it nested, ",
                      path.empty() ? "" : path + ": {", nested, path.empty() ? "" : "}"));
    }
    seen.emplace_back(name, item.first);
    check_keys(item.second, key, origin, allow_dots, depth + 1);
  }
}

}  // namespace

void check_yaml_keys(const YAML::Node& root, const std::string& origin, bool allow_dotted_keys,
                     const std::string& path) {
  check_keys(root, path, origin, allow_dotted_keys, 0);
}

void check_yaml_text_keys(const std::string& text, const std::string& origin,
                          bool allow_dotted_keys) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return;
  }
  check_yaml_keys(root, origin, allow_dotted_keys);
}

}  // namespace mtk::config
