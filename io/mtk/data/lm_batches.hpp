#pragma once
// Language-model batches from token shards: sentences packed into fixed-length sequences with
// segment ids and positions (as Tensor2Tensor's packed problems), a deterministic order from a
// seed, a resumable position, and per-rank slices of the batch dimension. docs/lm1b.md has the
// details and a worked example.

#include <mtk/data/token_shards.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtk {

/// The packed sequences of a list of token shards.
///
/// Packing (greedy, in file order, per shard; a sequence never mixes two shards): sentences
/// (their ids plus end-of-sentence) are appended to the current sequence while they fit in
/// `length` tokens; a sentence that does not fit starts the next sequence, so no sentence is split
/// across sequences. A sentence longer than `length` (end-of-sentence included) is cut into pieces
/// of `length` tokens; each piece starts a new sequence and is a segment of its own (positions
/// restart at 0, and the model does not see the earlier piece), as T2T does; the last piece may be
/// followed by further sentences. Every sequence is a contiguous range of its shard's tokens.
///
/// Rows of a sequence (length L each):
///   targets[i]     the token at i (0 = <pad> after the last token)
///   inputs[i]      targets[i-1] within a segment; 0 (<pad>, the start symbol) at a segment start
///   segment_ids[i] 1, 2, 3, ... for the packed sentences in order; 0 for padding
///   positions[i]   0, 1, 2, ... restarting at each segment; 0 for padding
/// The loss covers the positions whose segment id is non-zero.
///
/// Building the index reads every shard's sentence offsets (8 bytes per sentence), not its tokens.
class PackedSequences {
 public:
  PackedSequences(std::vector<TokenShard> shards, std::int64_t length);
  /// Opens `paths` (TokenShard::open) and packs them.
  static std::shared_ptr<const PackedSequences> open(const std::vector<std::string>& paths,
                                                     std::int64_t length);

  std::int64_t length() const { return length_; }
  /// Number of sequences.
  std::int64_t size() const { return total_; }
  /// Tokens in the shards (= non-padding positions over all sequences).
  std::int64_t num_tokens() const { return num_tokens_; }
  std::int64_t num_sentences() const { return num_sentences_; }
  /// Sentences longer than length() that were cut into pieces.
  std::int64_t num_cut_sentences() const { return cut_; }
  std::int32_t vocab_size() const { return vocab_size_; }
  const std::vector<TokenShard>& shards() const { return shards_; }

  /// Non-padding tokens of sequence `s`.
  std::int64_t tokens_in(std::int64_t s) const;
  /// Writes sequence `s` (length() values each) into the four arrays; s == -1 writes padding.
  void fill(std::int64_t s, std::int32_t* inputs, std::int32_t* targets, std::int32_t* segment_ids,
            std::int32_t* positions) const;
  /// The checks fill() makes, without filling: the token blocks of sequence `s` against their
  /// checksums and every id inside the vocabulary (the same error as fill()).
  void check(std::int64_t s) const;

 private:
  const std::int32_t* checked_tokens(std::int64_t s, const char* where, std::int64_t* count,
                                     const TokenShard** shard) const;
  std::vector<TokenShard> shards_;
  std::int64_t length_ = 0;
  std::vector<std::vector<std::int64_t>> bounds_;  // per shard: sequence token boundaries
  std::vector<std::int64_t> first_;                // per shard: global index of its first sequence
  std::int64_t total_ = 0, num_tokens_ = 0, num_sentences_ = 0, cut_ = 0;
  std::int32_t vocab_size_ = 0;
};

/// Where a batch stream stands: the next global row is sequence number `index` of epoch `epoch`'s
/// order. Rows are numbered across steps, so the position does not depend on the batch size.
struct LmPosition {
  std::int64_t epoch = 0;
  std::int64_t index = 0;
  bool operator==(const LmPosition& o) const { return epoch == o.epoch && index == o.index; }
  bool operator!=(const LmPosition& o) const { return !(*this == o); }
};

struct LmBatchOptions {
  /// Sequences per global batch (all ranks together).
  std::int64_t global_batch = 256;
  /// Seed of the per-epoch order.
  std::uint64_t seed = 1;
  /// A new pseudo-random order of all sequences every epoch; false: packing order (evaluation).
  bool shuffle = true;
  /// true: epochs follow each other forever (training); false: one pass, the last batch padded
  /// with empty rows, then done() (evaluation).
  bool repeat = true;
  /// The batch dimension's split: the number of slices along it (the size of the mesh dimension
  /// the layout maps `batch` to, 1 when unsplit) and this rank's slice (its coordinate on that
  /// mesh dimension). global_batch must be divisible by batch_slices.
  int batch_slices = 1;
  int slice_index = 0;
};

/// This rank's rows of one global batch, row-major [rows, length], ready for HostTensor::ints or a
/// Kokkos view.
struct LmBatch {
  std::int64_t rows = 0;  ///< global_batch / batch_slices
  std::int64_t length = 0;
  std::int64_t first_row = 0;  ///< global row of this slice's first row
  std::vector<std::int32_t> inputs, targets, segment_ids, positions;
  std::int64_t local_tokens = 0;   ///< non-padding positions in this slice
  std::int64_t global_tokens = 0;  ///< non-padding positions in the whole global batch
  std::int64_t global_sequences =
      0;                ///< non-empty rows of the global batch (< B only at the end of a pass)
  LmPosition position;  ///< the stream position this batch started at
};

/// Batches of packed sequences, identical on every rank without communication: global row r of
/// step t is sequence order(epoch, k) with epoch, k from t * global_batch + r; order(e, .) is a
/// pseudo-random permutation derived from (seed, e) alone (or the identity without shuffle).
class LmBatchStream {
 public:
  LmBatchStream(std::shared_ptr<const PackedSequences> sequences, const LmBatchOptions& options);

  /// This rank's slice of the next global batch. Throws after done().
  LmBatch next();
  /// Without repeat: whether the pass is complete.
  bool done() const;
  /// Global batches in one epoch (the last one partial unless size() divides evenly).
  std::int64_t batches_per_epoch() const;

  LmPosition position() const { return position_; }
  /// Continues from `p` (as saved by position()).
  void seek(const LmPosition& p);
  /// "lm-position v1 epoch=2 index=1536 sequences=120431 length=256 seed=1 shuffle=1": also
  /// records what the order depends on, so restore() can refuse a position of another stream.
  std::string save() const;
  /// Restores a save() string; throws naming what differs when it belongs to another data set,
  /// sequence length, seed or shuffle setting.
  void restore(const std::string& saved);

  /// The sequence at `index` of epoch `epoch`'s order.
  std::int64_t sequence_at(std::int64_t epoch, std::int64_t index) const;
  const PackedSequences& sequences() const { return *sequences_; }
  const LmBatchOptions& options() const { return options_; }

 private:
  std::shared_ptr<const PackedSequences> sequences_;
  LmBatchOptions options_;
  LmPosition position_;
};

/// A pseudo-random permutation of [0, n) from a 64-bit key: a Feistel network with cycle walking.
/// O(1) memory and random access; the same on every machine.
class IndexPermutation {
 public:
  IndexPermutation(std::int64_t n, std::uint64_t key);
  std::int64_t operator()(std::int64_t i) const;
  std::int64_t size() const { return n_; }

 private:
  std::uint64_t round(int r, std::uint64_t x) const;
  std::int64_t n_;
  int half_bits_ = 1;
  std::uint64_t mask_ = 1;
  std::uint64_t keys_[6] = {};
};

}  // namespace mtk
