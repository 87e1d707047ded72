#pragma once
// The few Unicode operations BLEU needs, on UTF-8 strings, with Python's str semantics (which
// sacreBLEU inherits): whitespace as str.isspace(), lower case as str.lower() (simple mapping).

#include <string>
#include <vector>

namespace mtk::text {

/// Whether code point `c` is whitespace for Python's str.split() / str.isspace().
bool is_python_space(char32_t c);

/// Splits on runs of Python whitespace, dropping empty pieces (Python's str.split()).
std::vector<std::string> split_whitespace(const std::string& utf8);

/// Removes trailing Python whitespace (str.rstrip()).
std::string rstrip(const std::string& utf8);

/// Lower-cases every code point (Unicode simple case mapping of the C library's C.UTF-8 locale).
std::string lowercase(const std::string& utf8);

/// Decodes one code point at `s[i]` and advances `i`; invalid bytes decode as U+FFFD, one byte
/// each.
char32_t decode_utf8(const std::string& s, size_t& i);

/// Appends the UTF-8 encoding of `c` to `out`.
void append_utf8(std::string& out, char32_t c);

}  // namespace mtk::text
