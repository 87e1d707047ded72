#pragma once
// sacreBLEU's default tokenizer "13a" (mteval-v13a.pl's), applied to one segment.

#include <string>

namespace mtk::text {

/// The segment tokenized as sacreBLEU 2.x's Tokenizer13a does: drops "<skipped>", joins "-\n",
/// turns newlines into spaces, unescapes &quot; &amp; &lt; &gt;, splits punctuation off words
/// (periods and commas not next to digits, a dash after a digit), and joins the tokens with single
/// spaces.
std::string tokenize_13a(const std::string& segment);

}  // namespace mtk::text
