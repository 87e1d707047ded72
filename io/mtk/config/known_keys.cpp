#include <mtk/base/error.hpp>
#include <mtk/config/known_keys.hpp>

#include <algorithm>

namespace mtk {
namespace config {
namespace {

// Levenshtein distance, one row at a time.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string joined(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names)
    list += (list.empty() ? "" : ", ") + n;
  return list;
}

}  // namespace

std::string nearest_name(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_distance = name.size() / 3 + 1;  // more differs: no suggestion
  for (const auto& k : known) {
    const std::size_t d = edit_distance(name, k);
    if (d < best_distance) {
      best = k;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace config

void reject_unknown_keys(const Config& config, const std::string& section,
                         const std::vector<std::string>& known) {
  std::vector<std::string> stack = {""};
  while (!stack.empty()) {
    const std::string prefix = stack.back();
    stack.pop_back();
    const std::string at = prefix.empty() ? section : section + "." + prefix;
    for (const auto& k : config.keys(at)) {
      const std::string key = prefix.empty() ? k : prefix + "." + k;
      if (std::find(known.begin(), known.end(), key) != known.end())
        continue;
      bool is_parent = false;
      for (const auto& kn : known)
        is_parent = is_parent || kn.rfind(key + ".", 0) == 0;
      if (is_parent) {
        stack.push_back(key);
        continue;
      }
      const std::string near = config::nearest_name(key, known);
      fail("mtk::Config",
           cat(config.origin(), ": unknown key '", section, ".", key, "'",
               near.empty() ? std::string() : cat("; did you mean '", section, ".", near, "'?"),
               " (known: ", config::joined(known), ")"));
    }
  }
}

void reject_unknown_sections(const Config& config, const std::string& where,
                             const std::vector<std::string>& known) {
  for (const auto& top : config.keys())
    if (std::find(known.begin(), known.end(), top) == known.end()) {
      const std::string near = config::nearest_name(top, known);
      fail(where, cat(config.origin(), ": unknown section '", top, "'",
                      near.empty() ? std::string() : cat("; did you mean '", near, "'?"),
                      " (known: ", config::joined(known), ")"));
    }
}

}  // namespace mtk
