#include <mtk/text/tokenizer_13a.hpp>
#include <mtk/text/utf8.hpp>

namespace mtk::text {
namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The class [\{-\~\[-\` -\&\(-\+\:-\@\/] of sacreBLEU's first rule: ASCII symbols and space.
bool is_symbol(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= 0x7B && u <= 0x7E) || (u >= 0x5B && u <= 0x60) || (u >= 0x20 && u <= 0x26) ||
         (u >= 0x28 && u <= 0x2B) || (u >= 0x3A && u <= 0x40) || u == '/';
}

// One pass of a two-character rule like Python's re.sub: left to right, non-overlapping. The
// second character of a match is consumed whole even when it starts a multi-byte sequence, as
// Python consumes the whole code point.
template <class Match, class Emit>
std::string two_char_rule(const std::string& s, Match match, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s, i)) {
      size_t next = i + 1;
      decode_utf8(s, next);
      emit(out, s.substr(i, 1), s.substr(i + 1, next - i - 1));
      i = next;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// The code point ending just before byte i is a non-digit: with UTF-8 any byte that is not an
// ASCII digit ends a non-digit code point.
}  // namespace

std::string tokenize_13a(const std::string& segment) {
  std::string line = segment;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";

  std::string out;
  out.reserve(line.size() * 2);
  for (char c : line) {
    if (is_symbol(c)) {
      out += ' ';
      out += c;
      out += ' ';
    } else {
      out += c;
    }
  }
  // ([^0-9])([\.,]) -> "\1 \2 ": the first character is any non-digit code point; its last byte
  // is what precedes the period, and the bytes before it were copied already.
  out = two_char_rule(
      out,
      [](const std::string& s, size_t i) {
        return !is_digit(s[i]) && (s[i + 1] == '.' || s[i + 1] == ',');
      },
      [](std::string& o, const std::string& a, const std::string& b) { o += a + " " + b + " "; });
  // ([\.,])([^0-9]) -> " \1 \2"
  out = two_char_rule(
      out,
      [](const std::string& s, size_t i) {
        return (s[i] == '.' || s[i] == ',') && !is_digit(s[i + 1]);
      },
      [](std::string& o, const std::string& a, const std::string& b) { o += " " + a + " " + b; });
  // ([0-9])(-) -> "\1 \2 "
  out = two_char_rule(
      out, [](const std::string& s, size_t i) { return is_digit(s[i]) && s[i + 1] == '-'; },
      [](std::string& o, const std::string& a, const std::string& b) { o += a + " " + b + " "; });

  std::string joined;
  for (const auto& token : split_whitespace(out)) {
    if (!joined.empty())
      joined += ' ';
    joined += token;
  }
  return joined;
}

}  // namespace mtk::text
