#pragma once
// The pieces `mtk-wmt translate` decodes: each input line whole, or sentence by sentence
// (translate.split), so that no line is cut at the model's length; the translations of a line's
// pieces are joined with a space.

#include <mtk/data/vocab.hpp>

#include "wmt_config.hpp"
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mtk::wmt {

struct TranslationPieces {
  std::vector<std::vector<std::int32_t>> tokens;  ///< per piece: its ids, EOS last
  std::vector<std::size_t> line;                  ///< per piece: the input line it is of
  std::size_t lines = 0;
  std::size_t cut = 0;  ///< pieces cut at `max_tokens` (split none only, or an unsplittable word)
};

/// The pieces of `lines` under `split`, each at most `max_tokens` ids before its EOS.
TranslationPieces split_for_translation(const std::vector<std::string>& lines,
                                        TranslateSettings::Split split, const Vocab& vocab,
                                        std::int64_t max_tokens);

/// Per line, its pieces' translations joined with single spaces (empty ones left out).
std::vector<std::string> join_translations(const TranslationPieces& pieces,
                                           const std::vector<std::string>& translations);

}  // namespace mtk::wmt
