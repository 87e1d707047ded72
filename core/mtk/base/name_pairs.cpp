#include <mtk/base/error.hpp>
#include <mtk/base/name_pairs.hpp>

#include <cctype>

namespace mtk {
namespace {

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return s.substr(b, e - b);
}

}  // namespace

bool is_valid_name(const std::string& name) {
  if (name.empty())
    return false;
  if (!(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

std::vector<std::pair<std::string, std::string>> parse_name_pairs(const std::string& text,
                                                                  const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos)
      end = text.size();
    std::string entry = trim(text.substr(start, end - start));
    start = end + 1;
    if (entry.empty())
      continue;
    size_t colon = entry.find(':');
    if (colon == std::string::npos || entry.find(':', colon + 1) != std::string::npos)
      fail(where, cat("malformed entry '", entry, "' in \"", text,
                      "\": expected name:value entries separated by ';'"));
    std::string name = trim(entry.substr(0, colon));
    std::string value = trim(entry.substr(colon + 1));
    if (!is_valid_name(name))
      fail(where, cat("invalid name '", name, "' in entry '", entry, "' of \"", text, "\""));
    if (value.empty())
      fail(where, cat("empty value in entry '", entry, "' of \"", text, "\""));
    out.emplace_back(name, value);
  }
  return out;
}

}  // namespace mtk
