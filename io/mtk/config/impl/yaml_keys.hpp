#pragma once
// Key checks of every YAML file MTK reads (configs, machine files, checkpoint metadata): a key
// given twice in a map is an error naming both lines (yaml-cpp keeps both and its lookups find the
// first, so the second would be silently ignored). Internal: yaml-cpp types stay out of the public
// headers.

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace mtk::config {

/// Fails (mtk::Error, naming `origin`, the key and both lines) at the first map of `root` that
/// names a key twice, or, unless `allow_dotted_keys`, has a key with a '.'. `path`: the dotted key
/// `root` is at ("" for a document).
void check_yaml_keys(const YAML::Node& root, const std::string& origin, bool allow_dotted_keys,
                     const std::string& path = "");

/// The non-empty parts of a dotted key ("train.lr" -> train, lr).
std::vector<std::string> split_key(const std::string& key);

/// A node as one line of text: its scalar, else its YAML with newlines as spaces.
std::string scalar_text(const YAML::Node& n);

}  // namespace mtk::config
