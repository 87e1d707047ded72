#pragma once
// Parsing of the "name:value;name:value" strings used for meshes and layouts.

#include <string>
#include <utility>
#include <vector>

namespace mtk {

/// Splits "a:1; b:2" into {{"a","1"},{"b","2"}}. Whitespace around names is ignored and a trailing
/// ';' is allowed. A malformed entry (no ':', empty side, two ':') throws naming `where`, the entry
/// and the whole text.
std::vector<std::pair<std::string, std::string>> parse_name_pairs(const std::string& text,
                                                                  const std::string& where);

/// A valid name: [A-Za-z_][A-Za-z0-9_]*.
bool is_valid_name(const std::string& name);

}  // namespace mtk
