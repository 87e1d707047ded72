#include <mtk/base/error.hpp>
#include <mtk/text/line_stream.hpp>
#include <mtk/text/sgm.hpp>
#include <mtk/text/utf8.hpp>

namespace mtk::text {
namespace {

constexpr std::size_t kMarkupBytes = 4096;

// A line over the limit: named with its file, number and the limit; it was read to its end but
// never held (text::LineStream keeps at most the limit).
[[noreturn]] void too_long(const char* where, const LineStream& in, std::size_t limit,
                           const std::string& limit_name) {
  fail(where, cat(in.path(), ":", in.line_number(), ": a line longer than the limit of ", limit,
                  " bytes", limit_name.empty() ? "" : cat(" (", limit_name, ")"),
                  "; it is refused, not cut (a segment this long is no sentence: is it the right "
                  "file?)"));
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

std::vector<std::string> read_sgm_segments(const std::string& path, bool unescape_entities,
                                           std::size_t max_line_bytes,
                                           const std::string& limit_name) {
  const char* where = "mtk::text::read_sgm_segments";
  // The markup around a segment (<seg id="...">, </seg>, indentation) does not count against
  // the limit: room for it on top.
  LineStream in(path, max_line_bytes + kMarkupBytes);
  std::vector<std::string> segments;
  RawLine raw;
  while (in.next(raw)) {
    const std::string& line = raw.text;
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos ||
        (line.compare(start, 5, "<seg ") != 0 && line.compare(start, 5, "<seg>") != 0))
      continue;
    if (raw.overlong)
      too_long(where, in, max_line_bytes, limit_name);
    const size_t open_end = line.find('>', start);
    const size_t close = line.rfind("</seg>");
    if (close == std::string::npos || close < open_end)
      fail(where, path + ":" + std::to_string(in.line_number()) +
                      ": a <seg> element without its closing </seg> on the same line");
    if (close - open_end - 1 > max_line_bytes)
      too_long(where, in, max_line_bytes, limit_name);
    std::string content = line.substr(open_end + 1, close - open_end - 1);
    if (unescape_entities)
      content = unescape_xml_entities(content);
    segments.push_back(collapse_whitespace(content));
  }
  if (segments.empty())
    fail(where, path + ": no <seg ...>...</seg> line (is it a .sgm file?)");
  return segments;
}

std::vector<std::string> read_text_lines(const std::string& path, bool unescape_entities,
                                         std::size_t max_line_bytes,
                                         const std::string& limit_name) {
  if (ends_with(path, ".sgm"))
    return read_sgm_segments(path, unescape_entities, max_line_bytes, limit_name);
  LineStream in(path, max_line_bytes);
  std::vector<std::string> lines;
  RawLine raw;
  while (in.next(raw)) {
    if (raw.overlong)
      too_long("mtk::text::read_text_lines", in, max_line_bytes, limit_name);
    lines.push_back(unescape_entities ? unescape_xml_entities(raw.text) : std::move(raw.text));
  }
  return lines;
}

}  // namespace mtk::text
