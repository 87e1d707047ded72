#include <mtk/text/utf8.hpp>

#include <clocale>
#include <cwctype>
#include <locale.h>

namespace mtk::text {

bool is_python_space(char32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

char32_t decode_utf8(const std::string& s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  int extra = 0;
  char32_t c = 0;
  if (b0 < 0x80) {
    ++i;
    return b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    extra = 1, c = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    extra = 2, c = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    extra = 3, c = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + extra >= s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k <= extra; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    c = (c << 6) | (byte(i + k) & 0x3F);
  }
  i += extra + 1;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::vector<std::string> split_whitespace(const std::string& s) {
  std::vector<std::string> pieces;
  std::string current;
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const char32_t c = decode_utf8(s, i);
    if (is_python_space(c)) {
      if (!current.empty())
        pieces.push_back(std::move(current));
      current.clear();
    } else {
      current.append(s, start, i - start);
    }
  }
  if (!current.empty())
    pieces.push_back(std::move(current));
  return pieces;
}

std::string rstrip(const std::string& s) {
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = decode_utf8(s, i);
    if (!is_python_space(c))
      end = i;
  }
  return s.substr(0, end);
}

std::string lowercase(const std::string& s) {
  // towlower_l with an explicit C.UTF-8 locale: independent of the process's global locale.
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t c = decode_utf8(s, i);
    if (c < 0x80)
      c = (c >= 'A' && c <= 'Z') ? c + 32 : c;
    else if (utf8 != static_cast<locale_t>(0))
      c = static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), utf8));
    append_utf8(out, c);
  }
  return out;
}

}  // namespace mtk::text
