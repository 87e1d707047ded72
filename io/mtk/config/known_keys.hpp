#pragma once
// Unknown keys and sections of a config are errors naming the key, the file, the nearest known
// name ("did you mean") and the known ones.

#include <mtk/config/config.hpp>

#include <string>
#include <vector>

namespace mtk {

/// Throws naming the first key under `section` that is not in `known` (nested keys "a.b"), the
/// file, the known key it most resembles and the known keys.
void reject_unknown_keys(const Config& config, const std::string& section,
                         const std::vector<std::string>& known);

/// Throws naming the first top-level section of `config` not in `known`; `where` starts the
/// message (the tool, e.g. "mtk-lm1b").
void reject_unknown_sections(const Config& config, const std::string& where,
                             const std::vector<std::string>& known);

namespace config {

/// The names separated by ", " (error messages' lists).
std::string joined(const std::vector<std::string>& names);
/// The name of `known` nearest to `name` by edit distance (a swap of neighbours is one edit), ""
/// when none is near (more than a third of the name's letters, or one letter, differ).
std::string nearest_name(const std::string& name, const std::vector<std::string>& known);

}  // namespace config
}  // namespace mtk
