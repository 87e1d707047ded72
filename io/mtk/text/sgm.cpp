#include <mtk/base/error.hpp>
#include <mtk/text/sgm.hpp>
#include <mtk/text/utf8.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace mtk::text {
namespace {

std::ifstream open_or_fail(const std::string& path, const char* where) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(where, "cannot open '" + path + "': " + std::strerror(errno));
  return in;
}

std::string collapse_whitespace(const std::string& s) {
  std::string out;
  for (const auto& piece : split_whitespace(s)) {
    if (!out.empty())
      out += ' ';
    out += piece;
  }
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::string unescape_xml_entities(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t semi = text[i] == '&' ? text.find(';', i) : std::string::npos;
    if (semi == std::string::npos || semi - i > 10) {
      out += text[i++];
      continue;
    }
    const std::string name = text.substr(i + 1, semi - i - 1);
    static const std::pair<const char*, const char*> named[] = {
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
    bool done = false;
    for (const auto& [n, v] : named)
      if (name == n) {
        out += v;
        done = true;
      }
    if (!done && name.size() > 1 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      const std::string digits = name.substr(hex ? 2 : 1);
      char* end = nullptr;
      const unsigned long code = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
      if (!digits.empty() && *end == '\0' && code > 0 && code <= 0x10FFFF) {
        append_utf8(out, static_cast<char32_t>(code));
        done = true;
      }
    }
    if (done) {
      i = semi + 1;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::vector<std::string> read_sgm_segments(const std::string& path, bool unescape_entities) {
  const char* where = "mtk::text::read_sgm_segments";
  auto in = open_or_fail(path, where);
  std::vector<std::string> segments;
  std::string line;
  for (long lineno = 1; std::getline(in, line); ++lineno) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos ||
        (line.compare(start, 5, "<seg ") != 0 && line.compare(start, 5, "<seg>") != 0))
      continue;
    const size_t open_end = line.find('>', start);
    const size_t close = line.rfind("</seg>");
    if (close == std::string::npos || close < open_end)
      fail(where, path + ":" + std::to_string(lineno) +
                      ": a <seg> element without its closing </seg> on the same line");
    std::string content = line.substr(open_end + 1, close - open_end - 1);
    if (unescape_entities)
      content = unescape_xml_entities(content);
    segments.push_back(collapse_whitespace(content));
  }
  if (in.bad())
    fail(where, "read error in '" + path + "': " + std::strerror(errno));
  if (segments.empty())
    fail(where, path + ": no <seg ...>...</seg> line (is it a .sgm file?)");
  return segments;
}

std::vector<std::string> read_text_lines(const std::string& path, bool unescape_entities) {
  if (ends_with(path, ".sgm"))
    return read_sgm_segments(path, unescape_entities);
  auto in = open_or_fail(path, "mtk::text::read_text_lines");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    lines.push_back(unescape_entities ? unescape_xml_entities(line) : line);
  }
  if (in.bad())
    fail("mtk::text::read_text_lines", "read error in '" + path + "': " + std::strerror(errno));
  return lines;
}

}  // namespace mtk::text
