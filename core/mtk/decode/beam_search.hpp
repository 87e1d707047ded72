#pragma once
// Batched beam search and greedy search over any step function (a model, or a host callable in
// tests). Host-only and deterministic: candidates are ordered by cumulative log-probability, ties
// by (beam slot, token id), so equal log-probs give equal results on any rank count.

#include <cstdint>
#include <functional>
#include <vector>

namespace mtk::decode {

/// One step of a model for `batch` x `beam` hypotheses (row-major, hypothesis k of row b at
/// b * beam + k). Before computing, hypothesis k of row b continues the one in slot
/// parents[b * beam + k] of the previous step (identity at position 0): a model reorders its
/// caches so. `tokens` are the input tokens at `position` (the start id at 0, then the tokens
/// chosen last step). Returns normalised log-probabilities [batch, beam, vocab] of the next token.
using StepFunction =
    std::function<std::vector<float>(std::int64_t position, const std::vector<std::int32_t>& tokens,
                                     const std::vector<std::int32_t>& parents)>;

struct BeamSearchOptions {
  std::int64_t beam_size = 4;    ///< hypotheses per row; 1 is greedy search
  double alpha = 0.6;            ///< length penalty exponent (0: plain log-probability)
  std::int64_t max_length = 64;  ///< tokens generated at most per hypothesis, EOS included
  std::int32_t eos_id = 1;       ///< ends a hypothesis; negative: none (decode to max_length)
  std::int32_t start_id = 0;     ///< the input token at position 0
  /// Per row (empty: none): tokens a hypothesis has before EOS may end it (EOS is ruled out
  /// earlier), e.g. a fraction of the source's length against outputs that stop too soon.
  std::vector<std::int64_t> min_lengths;
};

/// A decoded sequence.
struct Hypothesis {
  std::vector<std::int32_t> tokens;  ///< generated tokens, without the final EOS
  double log_prob = 0;               ///< sum of the log-probabilities, the EOS's included
  double score = 0;                  ///< log_prob / length_penalty(length(), alpha)
  bool finished = false;             ///< ended with EOS (false: cut at max_length)
  /// Tokens scored: the EOS counts.
  std::int64_t length() const {
    return static_cast<std::int64_t>(tokens.size()) + (finished ? 1 : 0);
  }
};

/// Tensor2Tensor's length penalty ((5 + length) / 6)^alpha.
double length_penalty(std::int64_t length, double alpha);

/// Beam search for `batch` rows over a vocabulary of `vocab_size` ids; `step` is called with
/// batch x beam_size hypotheses. Each step extends every live hypothesis by every token and ranks
/// the candidates of a row by cumulative log-probability; of the best 2 x beam, those ending in
/// EOS among the best beam are finished (scored log_prob / length_penalty), and the best beam not
/// ending in EOS live on. A row stops when it has beam finished hypotheses and the best live
/// log_prob / length_penalty(max_length) cannot beat the worst of them (Tensor2Tensor's stop; beam
/// 1: at its first EOS), or when none live; at
/// max_length the live ones among the best beam candidates end unended. Returns per row its
/// finished hypotheses, best score first (ties: the earlier finished), at most beam_size. With
/// beam_size 1 it is greedy_search. Throws naming the sizes when `step` returns the wrong number of
/// values.
std::vector<std::vector<Hypothesis>> beam_search(const StepFunction& step, std::int64_t batch,
                                                 std::int64_t vocab_size,
                                                 const BeamSearchOptions& options);

/// What a decoder built for `batch` rows of `beam` hypotheses and at most `max_length` positions
/// runs: greedy_search for beam 1 (one hypothesis per row), else beam_search. Options of another
/// beam or a longer max_length fail naming `where` and the sizes.
std::vector<std::vector<Hypothesis>> search_in_decoder(const StepFunction& step, std::int64_t batch,
                                                       std::int64_t beam, std::int64_t max_length,
                                                       std::int64_t vocab_size,
                                                       const BeamSearchOptions& options,
                                                       const char* where);

/// Greedy search: at each position the most probable token (ties: the lower id), until EOS or
/// max_length. `step` is called with batch x 1 hypotheses (parents all 0); options.beam_size is
/// ignored. One hypothesis per row.
std::vector<Hypothesis> greedy_search(const StepFunction& step, std::int64_t batch,
                                      std::int64_t vocab_size, const BeamSearchOptions& options);

/// Log-softmax of each row of `logits` (rows of `vocab_size` values), in double: turns a model's
/// logits into what StepFunction returns.
std::vector<float> log_softmax_rows(const float* logits, std::int64_t rows,
                                    std::int64_t vocab_size);

}  // namespace mtk::decode
