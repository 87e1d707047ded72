#include <mtk/base/error.hpp>
#include <mtk/config/known_keys.hpp>

#include <algorithm>

namespace mtk {
namespace config {
namespace {

// Edit distance counting a swap of neighbours as one edit (optimal string alignment).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min(
          {d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string joined(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names)
    list += (list.empty() ? "" : ", ") + n;
  return list;
}

std::string nearest_name(const std::string& name, const std::vector<std::string>& known) {
  std::string best;
  // At most a third of the letters (one, for short names) may differ.
  std::size_t best_distance = std::max<std::size_t>(1, name.size() / 3) + 1;
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
