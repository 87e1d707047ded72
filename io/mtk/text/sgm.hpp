#pragma once
// Reading WMT's newstest .sgm files: one `<seg id="N">text</seg>` element per line.

#include <string>
#include <vector>

namespace mtk::text {

/// The text of every `<seg ...>...</seg>` line, in file order, with surrounding whitespace
/// stripped and inner runs collapsed to one space (what sacreBLEU extracts). Other lines (<srcset>,
/// <doc>, <p>) are skipped. With `unescape_entities`, XML entities (&amp; &lt; &gt; &quot; &apos;
/// and numeric &#N; &#xH;) are decoded, for feeding a translator; BLEU references are scored as
/// sacreBLEU reads them, escaped (its tokenizer decodes the four common ones). A `<seg` line
/// without
/// `</seg>`, or a file with no segment, is an error naming the file and line.
std::vector<std::string> read_sgm_segments(const std::string& path, bool unescape_entities);

/// Decodes XML entities; an unknown or malformed entity stays as written.
std::string unescape_xml_entities(const std::string& text);

/// Lines of a plain text file (without their newline), or the segments of a .sgm file (by the
/// ".sgm" suffix, escaped as sacreBLEU reads them unless `unescape_entities`).
std::vector<std::string> read_text_lines(const std::string& path, bool unescape_entities = false);

}  // namespace mtk::text
