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

/// Pairs of a source and a target shard, shuffled every epoch (a keyed permutation, the same on
/// every rank), dealt in global batches whose rows are split into `batch_slices` equal slices;
/// this rank takes slice `slice_index`. Unpacked, a row holds one pair. Packed (Tensor2Tensor's
/// packed translation problems), a row holds as many pairs as fit in `length` on both sides, with
/// segment ids 1, 2, ... and positions restarting per pair; the rows are made once from a keyed
/// order of the pairs, and the epochs shuffle the rows.
class PairStream {
 public:
  PairStream(TokenShard source, TokenShard target, std::int64_t global_batch, std::int64_t length,
             int batch_slices, int slice_index, std::uint64_t seed, bool pack = false);
  PairBatch next();
  std::int64_t epoch() const { return epoch_; }
  /// Training pairs.
  std::int64_t size() const { return source_.num_sentences(); }
  /// Rows of an epoch: size() unpacked, fewer packed.
  std::int64_t rows_per_epoch() const;
  std::int64_t batches_per_epoch() const;
  /// "epoch index": the position a checkpoint keeps.
  std::string save() const;
  void restore(const std::string& saved);

 private:
  std::int64_t row_at(std::int64_t epoch, std::int64_t index) const;
  void pack_rows();
  TokenShard source_, target_;
  std::int64_t global_batch_, length_;
  int slices_, slice_;
  std::uint64_t seed_;
  bool pack_;
  std::vector<std::int64_t> packed_pairs_, row_begin_;  // packed: row r's pairs
  std::int64_t epoch_ = 0, index_ = 0;                  // index: the next global row of this epoch
};

/// Fills row `row` of `b` with a source and a target (each ending with EOS, at most b.length ids)
/// as segment `segment`, starting at `source_at` and `target_at` of the row; returns the target
/// tokens written.
std::int64_t fill_pair_row(PairBatch& b, std::int64_t row, const std::vector<std::int32_t>& source,
                           const std::vector<std::int32_t>& target, std::int32_t segment = 1,
                           std::int64_t source_at = 0, std::int64_t target_at = 0);

}  // namespace mtk::wmt
