#include <mtk/text/sentences.hpp>
#include <mtk/text/utf8.hpp>

#include <algorithm>
#include <array>
#include <cwctype>

namespace mtk::text {
namespace {

bool ends_sentence(char32_t c) {
  return c == U'.' || c == U'!' || c == U'?' || c == U'\u2026' || c == U'\u3002' ||
         c == U'\uFF01' || c == U'\uFF1F';
}

bool closes(char32_t c) {
  return c == U'"' || c == U'\'' || c == U')' || c == U']' || c == U'\u00BB' || c == U'\u201D' ||
         c == U'\u2019';
}

bool opens(char32_t c) {
  return c == U'"' || c == U'\'' || c == U'(' || c == U'[' || c == U'\u00AB' || c == U'\u201C' ||
         c == U'\u2018';
}

// A sentence may start here: not a lower-case letter (iswlower in C.UTF-8 knows Latin, Greek and
// Cyrillic cases); digits, capitals, caseless scripts and opening quotes may.
bool may_start(char32_t c) {
  return !std::iswlower(static_cast<wint_t>(c)) && !is_python_space(c) && !ends_sentence(c);
}

// The word before the final '.' at `end` (exclusive) of `s`, lower-cased.
bool abbreviation_before(const std::string& s, size_t dot) {
  size_t b = dot;
  while (b > 0 && !std::isspace(static_cast<unsigned char>(s[b - 1])) && s[b - 1] != '(')
    --b;
  std::string word = lowercase(s.substr(b, dot - b));
  if (word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0])))
    return true;  // an initial
  static const std::array<const char*, 14> known = {"e.g", "i.e", "etc", "mr", "mrs",    "ms", "dr",
                                                    "vs",  "no",  "fig", "cf", "approx", "st", "p"};
  return std::find(known.begin(), known.end(), word) != known.end();
}

std::string trimmed(const std::string& s, size_t from, size_t to) {
  while (from < to && std::isspace(static_cast<unsigned char>(s[from])))
    ++from;
  while (to > from && std::isspace(static_cast<unsigned char>(s[to - 1])))
    --to;
  return s.substr(from, to - from);
}

}  // namespace

std::vector<std::string> split_sentences(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < line.size()) {
    const size_t at = i;
    const char32_t c = decode_utf8(line, i);
    if (!ends_sentence(c))
      continue;
    size_t j = i;  // past the run of enders and closers
    bool single_dot = c == U'.';
    for (size_t k = j; k < line.size();) {
      const char32_t d = decode_utf8(line, k);
      if (!ends_sentence(d) && !closes(d))
        break;
      single_dot = single_dot && d != U'.';
      j = k;
    }
    size_t k = j, spaces = 0;
    for (;;) {
      while (k < line.size() && std::isspace(static_cast<unsigned char>(line[k]))) {
        ++k;
        ++spaces;
      }
      // A closing mark after a space (French « oui. ») still belongs to this sentence.
      size_t after = k;
      if (k >= line.size() || spaces == 0)
        break;
      const char32_t d = decode_utf8(line, after);
      if (!closes(d) || opens(d))
        break;
      j = k = after;
      spaces = 0;
    }
    if (spaces == 0 || k >= line.size()) {
      i = j;
      continue;
    }
    size_t peek = k;
    const char32_t next = decode_utf8(line, peek);
    const bool boundary = (may_start(next) || opens(next)) &&
                          !(single_dot && c == U'.' && abbreviation_before(line, at));
    if (boundary) {
      std::string s = trimmed(line, start, j);
      if (!s.empty())
        out.push_back(std::move(s));
      start = k;
    }
    i = k;
  }
  std::string last = trimmed(line, start, line.size());
  if (!last.empty())
    out.push_back(std::move(last));
  return out;
}

}  // namespace mtk::text
