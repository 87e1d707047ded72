#pragma once
// Reading WMT's newstest .sgm files: one `<seg id="N">text</seg>` element per line.

#include <cstddef>
#include <string>
#include <vector>

namespace mtk::text {

/// The longest line (a segment's text in a .sgm file) the readers below accept unless the caller
/// gives its own limit (mtk-wmt gives data.max_line_bytes, the training pairs' limit).
inline constexpr std::size_t kDefaultMaxLineBytes = std::size_t{1} << 20;

/// The text of every `<seg ...>...</seg>` line, in file order, with surrounding whitespace
/// stripped and inner runs collapsed to one space (what sacreBLEU extracts). Other lines (<srcset>,
/// <doc>, <p>) are skipped. With `unescape_entities`, XML entities (&amp; &lt; &gt; &quot; &apos;
/// and numeric &#N; &#xH;) are decoded, for feeding a translator; BLEU references are scored as
/// sacreBLEU reads them, escaped (its tokenizer decodes the four common ones). A `<seg` line
/// without
/// `</seg>`, or a file with no segment, is an error naming the file and line.
/// Lines are streamed (text::LineStream: plain or gzip): a segment of more than `max_line_bytes`
/// bytes is an error naming the file, the line and the limit (`limit_name`, e.g.
/// "data.max_line_bytes"), found with bounded memory: it is read to its end but never held.
std::vector<std::string> read_sgm_segments(const std::string& path, bool unescape_entities,
                                           std::size_t max_line_bytes = kDefaultMaxLineBytes,
                                           const std::string& limit_name = "");

/// Decodes XML entities; an unknown or malformed entity stays as written.
std::string unescape_xml_entities(const std::string& text);

/// Lines of a plain text file (without their newline), or the segments of a .sgm file (by the
/// ".sgm" suffix, escaped as sacreBLEU reads them unless `unescape_entities`). Streamed, with the
/// same limit and error as read_sgm_segments for a line of more than `max_line_bytes` bytes.
std::vector<std::string> read_text_lines(const std::string& path, bool unescape_entities = false,
                                         std::size_t max_line_bytes = kDefaultMaxLineBytes,
                                         const std::string& limit_name = "");

}  // namespace mtk::text
