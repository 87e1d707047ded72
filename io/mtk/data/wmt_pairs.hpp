#pragma once
// The prepared translation data of mtk-wmt (docs/wmt.md): a folder with the shared SentencePiece
// vocabulary and token shards of the training (and dev) pairs, source and target in two shards with
// the same number of sentences in the same order; and the batches train feeds, one pair per row.

#include <mtk/data/token_shards.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mtk::wmt {

/// The files of a prepared folder.
struct PreparedPaths {
  std::string dir;
  std::string vocab() const { return dir + "/vocab.model"; }
  std::string source(const std::string& split) const { return dir + "/" + split + ".src.tokens"; }
  std::string target(const std::string& split) const { return dir + "/" + split + ".tgt.tokens"; }
  std::string summary() const { return dir + "/summary.json"; }
};

/// One step's rows of this rank: source and target of one pair per row, 0-padded to `length`,
/// each side ending with EOS (as the shards hold them); the decoder input is the target shifted
/// right behind the start id 0. Segment ids are 1 on tokens, 0 on padding.
struct PairBatch {
  std::int64_t rows = 0, length = 0;
  std::vector<std::int32_t> sources, source_segments, source_positions;
  std::vector<std::int32_t> inputs, targets, segments, positions;
  std::int64_t global_tokens = 0;  ///< target tokens over all ranks' rows
};

/// Pairs of a source and a target shard, shuffled every epoch (a keyed permutation of the pair
/// indices, the same on every rank), dealt in global batches whose rows are split into
/// `batch_slices` equal slices; this rank takes slice `slice_index`.
class PairStream {
 public:
  PairStream(TokenShard source, TokenShard target, std::int64_t global_batch, std::int64_t length,
             int batch_slices, int slice_index, std::uint64_t seed);
  PairBatch next();
  std::int64_t epoch() const { return epoch_; }
  std::int64_t size() const { return source_.num_sentences(); }
  std::int64_t batches_per_epoch() const;
  /// "epoch index": the position a checkpoint keeps.
  std::string save() const;
  void restore(const std::string& saved);

 private:
  std::int64_t pair_at(std::int64_t epoch, std::int64_t index) const;
  TokenShard source_, target_;
  std::int64_t global_batch_, length_;
  int slices_, slice_;
  std::uint64_t seed_;
  std::int64_t epoch_ = 0, index_ = 0;  // index: the next global row of this epoch
};

/// Fills row `row` of `b` with a source and a target (each ending with EOS, at most b.length ids).
void fill_pair_row(PairBatch& b, std::int64_t row, const std::vector<std::int32_t>& source,
                   const std::vector<std::int32_t>& target);

}  // namespace mtk::wmt
