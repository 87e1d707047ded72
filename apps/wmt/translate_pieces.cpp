#include "translate_pieces.hpp"

#include <mtk/base/error.hpp>
#include <mtk/text/sentences.hpp>
#include <mtk/text/utf8.hpp>

namespace mtk::wmt {
namespace {

// `text` in pieces of at most `max_tokens` ids, cut between words (greedily: as many words a
// piece as fit); a single word over the limit is cut at it (counted in `cut`).
void add_in_words(const std::string& text, const Vocab& vocab, std::int64_t max_tokens,
                  std::size_t line, TranslationPieces& out) {
  std::vector<std::int32_t> whole = vocab.encode(text);
  if (static_cast<std::int64_t>(whole.size()) <= max_tokens) {
    if (whole.empty())
      return;
    whole.push_back(Vocab::kEosId);
    out.tokens.push_back(std::move(whole));
    out.line.push_back(line);
    return;
  }
  const std::vector<std::string> words = text::split_whitespace(text);
  std::string piece;
  std::vector<std::int32_t> ids;
  auto flush = [&] {
    if (piece.empty())
      return;
    ids.push_back(Vocab::kEosId);
    out.tokens.push_back(std::move(ids));
    out.line.push_back(line);
    piece.clear();
    ids.clear();
  };
  for (const std::string& w : words) {
    const std::string longer = piece.empty() ? w : piece + " " + w;
    std::vector<std::int32_t> longer_ids = vocab.encode(longer);
    if (static_cast<std::int64_t>(longer_ids.size()) <= max_tokens) {
      piece = longer;
      ids = std::move(longer_ids);
      continue;
    }
    flush();
    ids = vocab.encode(w);
    piece = w;
    if (static_cast<std::int64_t>(ids.size()) > max_tokens) {
      ids.resize(static_cast<std::size_t>(max_tokens));
      ++out.cut;
      flush();
    }
  }
  flush();
}

}  // namespace

TranslationPieces split_for_translation(const std::vector<std::string>& lines,
                                        TranslateSettings::Split split, const Vocab& vocab,
                                        std::int64_t max_tokens) {
  if (max_tokens < 1)
    fail("mtk-wmt translate", cat("pieces of at most ", max_tokens,
                                  " tokens: model.length - 1 "
                                  "must be at least 1"));
  using Split = TranslateSettings::Split;
  TranslationPieces out;
  out.lines = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::vector<std::int32_t> ids = vocab.encode(lines[i]);
    const bool fits = static_cast<std::int64_t>(ids.size()) <= max_tokens;
    if (split == Split::none || (split == Split::long_lines && fits)) {
      if (!fits) {
        ids.resize(static_cast<std::size_t>(max_tokens));  // as training's limit had it
        ++out.cut;
      }
      ids.push_back(Vocab::kEosId);
      out.tokens.push_back(std::move(ids));
      out.line.push_back(i);
      continue;
    }
    const std::size_t before = out.tokens.size();
    for (const std::string& sentence : text::split_sentences(lines[i]))
      add_in_words(sentence, vocab, max_tokens, i, out);
    if (out.tokens.size() == before) {  // nothing but whitespace: one empty piece
      out.tokens.push_back({Vocab::kEosId});
      out.line.push_back(i);
    }
  }
  return out;
}

std::vector<std::string> join_translations(const TranslationPieces& pieces,
                                           const std::vector<std::string>& translations) {
  if (translations.size() != pieces.tokens.size())
    fail("mtk-wmt translate",
         cat(translations.size(), " translations of ", pieces.tokens.size(), " pieces"));
  std::vector<std::string> out(pieces.lines);
  for (std::size_t p = 0; p < translations.size(); ++p) {
    if (translations[p].empty())
      continue;
    std::string& line = out[pieces.line[p]];
    line += line.empty() ? translations[p] : " " + translations[p];
  }
  return out;
}

}  // namespace mtk::wmt
