#pragma once
// Sentence boundaries in a line of text, for translating a paragraph sentence by sentence: a model
// trained on pairs of at most model.length tokens truncates, or collapses, a longer input.

#include <string>
#include <vector>

namespace mtk::text {

/// The sentences of `line`, in order, each without the whitespace around it; their concatenation
/// with single spaces is `line` with its whitespace runs between sentences made single. A boundary
/// is a run of '.', '!', '?' (or '…', '。', '！', '？'), then any closing quotes or brackets, then
/// whitespace, then a letter that is not lower case, a digit or an opening quote or bracket; not
/// after a single letter ("J. Smith") or a common abbreviation (e.g., i.e., etc., Mr., Dr., vs.,
/// No., Fig., cf.). A line without a boundary is one sentence; an empty line none.
std::vector<std::string> split_sentences(const std::string& line);

}  // namespace mtk::text
