#pragma once
// Corpus BLEU exactly as sacreBLEU 2.x computes its default score (tokenizer 13a, n-grams 1..4,
// exponential smoothing, brevity penalty against the closest reference length), so that MTK's
// translation scores are the numbers papers quote. The algorithm: docs/bleu.md.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mtk::text {

/// The version of sacreBLEU whose default BLEU this reproduces; it appears in the signature.
inline constexpr const char* kSacreBleuVersion = "2.4.3";

struct BleuOptions {
  /// Lower-case hypotheses and references first (sacreBLEU -lc); the signature says case:lc.
  bool lowercase = false;
  /// Tokenize with 13a ("13a") or not at all ("none").
  std::string tokenize = "13a";
};

/// Matches and totals summed over a corpus; scores are computed from these.
struct BleuStats {
  std::array<std::int64_t, 4> matches{};
  std::array<std::int64_t, 4> totals{};
  std::int64_t hyp_len = 0;
  std::int64_t ref_len = 0;
};

struct BleuScore {
  double score = 0;                    // 0..100
  std::array<double, 4> precisions{};  // smoothed n-gram precisions, 0..100
  double brevity_penalty = 1;
  double ratio = 0;  // hyp_len / ref_len
  BleuStats stats;
  std::size_t num_refs = 1;
  BleuOptions options;

  /// "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.3"
  std::string signature() const;
  /// sacreBLEU's line: "BLEU|<signature> = 26.60 58.9/32.3/20.1/13.0 (BP = 1.000 ratio = 1.020
  /// hyp_len = 62496 ref_len = 61287)".
  std::string line() const;
  /// The same as one JSON object (name, score, signature, verbose_score, the counts).
  std::string json() const;
};

/// Adds one segment's statistics: `hypothesis` against its `references` (already tokenized).
void accumulate_segment(BleuStats& stats, const std::string& hypothesis,
                        const std::vector<std::string>& references);

/// BLEU from corpus statistics (sacreBLEU's compute_bleu with smooth "exp").
BleuScore score_from_stats(const BleuStats& stats);

/// Corpus BLEU of `hypotheses` against one or more reference streams, each with one line per
/// hypothesis. Throws mtk::Error when a reference stream's line count differs, naming both counts.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references,
                      const BleuOptions& options = {});

}  // namespace mtk::text
