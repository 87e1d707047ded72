#pragma once
// Binary token shards: the encoded text of one corpus shard, read in parallel by every rank.
//
// File layout (little-endian, docs/lm1b.md):
//   header    128 bytes (TokenShardInfo; magic "MTKTOKEN", version 3, the checksum algorithm)
//   tokens    int32[num_tokens]: each sentence's ids followed by the end-of-sentence id
//   padding   to a multiple of 8 bytes
//   offsets   int64[num_sentences + 1]: first token of each sentence; the last is num_tokens
//   checksums uint64[ceil(num_tokens / kTokenShardBlock) + 1]: one per block of tokens, then one
//             of the offsets
// Version 3 (written now) checksums the header, each token block and the offsets with XXH3-64;
// version 2 (written before) with MTK's own hashes, still read and verified.
// A shard is written to a temporary file and renamed into place when complete, so a file with the
// final name is always whole; the reader checks the header against the file size, the offsets
// against their checksum at open, and each token block against its checksum when first read.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtk {

struct LineStats;

/// Tokens per checksummed block of a token shard (16 KiB).
constexpr std::int64_t kTokenShardBlock = 4096;

/// The algorithm of a token shard's checksums (header bytes 14..15).
enum class TokenShardChecksum : std::uint16_t {
  legacy = 0,   ///< format version 2: FNV-1a 64 (header), a 4-lane multiply-rotate chain (tokens)
  xxh3_64 = 1,  ///< format version 3: XXH3-64 of the header, of each token block, of the offsets
};

/// "xxh3-64" or "legacy (format 2)".
const char* token_shard_checksum_name(TokenShardChecksum checksum);

/// The header of a token shard.
struct TokenShardInfo {
  std::int32_t vocab_size = 0;
  std::int32_t eos_id = 1;
  std::uint64_t vocab_fingerprint = 0;  ///< mtk::Vocab::fingerprint() of the encoding vocabulary
  std::int64_t num_sentences = 0;
  std::int64_t num_tokens = 0;  ///< including one end-of-sentence per sentence
  std::int64_t num_words = 0;   ///< whitespace-separated words of the source sentences
  // Where the shard came from, so that a re-run can tell whether it is still current:
  std::uint64_t source_bytes = 0;   ///< size of the text shard
  std::int64_t max_line_bytes = 0;  ///< the line limit used when reading it
  std::int64_t source_lines = 0;    ///< lines read (encoded + skipped)
  std::int64_t skipped_empty = 0;
  std::int64_t skipped_invalid_utf8 = 0;
  std::int64_t skipped_too_long = 0;
  /// Set by the reader from the file; the writer always uses xxh3_64.
  TokenShardChecksum checksum = TokenShardChecksum::xxh3_64;

  std::int64_t skipped() const { return skipped_empty + skipped_invalid_utf8 + skipped_too_long; }
  /// Copies the line counts of the reader that produced the shard.
  void set_source_stats(const LineStats& stats);
};

/// Writes one token shard. Sentences are appended in order; finish() writes the offsets and the
/// header and renames the temporary file to `path`. Destroying an unfinished writer removes the
/// temporary file.
class TokenShardWriter {
 public:
  /// `info` gives vocab_size, eos_id, vocab_fingerprint and the source fields; the counts are
  /// filled in by the writer.
  TokenShardWriter(const std::string& path, const TokenShardInfo& info);
  ~TokenShardWriter();
  TokenShardWriter(const TokenShardWriter&) = delete;
  TokenShardWriter& operator=(const TokenShardWriter&) = delete;

  /// Appends `ids` and the end-of-sentence id. Ids must lie in [0, vocab_size) and must not be
  /// the end-of-sentence id.
  void add_sentence(const std::int32_t* ids, std::size_t count, std::int64_t words);
  void add_sentence(const std::vector<std::int32_t>& ids, std::int64_t words) {
    add_sentence(ids.data(), ids.size(), words);
  }
  /// Line counts to record in the header (call before finish()).
  void set_source_stats(const LineStats& stats) { info_.set_source_stats(stats); }
  /// Completes the file; returns the final header.
  TokenShardInfo finish();

 private:
  void write(const void* data, std::size_t bytes);
  std::string path_, tmp_;
  TokenShardInfo info_;
  std::vector<std::int32_t> block_;  // the current token block, checksummed when full
  std::vector<std::uint64_t> block_sums_;
  int fd_ = -1;
  std::vector<char> buffer_;
  std::vector<std::int64_t> offsets_;
  std::int64_t written_ = 0;
  bool finished_ = false;
};

/// A token shard opened read-only with mmap: a rank touches only the pages it reads. Copies share
/// the mapping. Thread-safe for reading.
class TokenShard {
 public:
  TokenShard() = default;
  /// Opens and validates `path` (magic, version, sizes against the file size, the offsets'
  /// checksum); errors name the file and what is wrong. Shards of format version 2 are read and
  /// verified with their own checksums; version 1 (no token checksums) is refused:
  /// `mtk-lm1b prepare` re-encodes it.
  static TokenShard open(const std::string& path);
  /// Reads only the header of `path`; throws like open().
  static TokenShardInfo read_info(const std::string& path);
  /// Whether `path` is a complete, undamaged shard (every token block matches its checksum) made
  /// with the vocabulary `vocab_fingerprint` from a source of `source_bytes` bytes read with
  /// `max_line_bytes`. `why` gets the reason when it is not.
  static bool is_current(const std::string& path, std::uint64_t vocab_fingerprint,
                         std::uint64_t source_bytes, std::int64_t max_line_bytes,
                         std::string* why = nullptr);

  const std::string& path() const;
  const TokenShardInfo& info() const;
  std::int64_t num_sentences() const { return info().num_sentences; }
  std::int64_t num_tokens() const { return info().num_tokens; }
  /// All tokens (num_tokens of them), every block checked against its checksum.
  const std::int32_t* tokens() const;
  /// Tokens [begin, begin + count): the blocks they lie in are checked against their checksums
  /// the first time any copy of this shard reads them (an error names the file, the tokens and
  /// their byte offsets). Thread-safe.
  const std::int32_t* tokens(std::int64_t begin, std::int64_t count) const;
  /// First token of sentence `i` (0 <= i <= num_sentences; i == num_sentences gives num_tokens).
  std::int64_t sentence_offset(std::int64_t i) const;
  /// The sentence offsets (num_sentences + 1 of them).
  const std::int64_t* offsets() const;
  /// Ids of sentence `i` including its end-of-sentence id.
  std::vector<std::int32_t> sentence(std::int64_t i) const;

 private:
  struct Mapping;
  std::shared_ptr<const Mapping> map_;
};

}  // namespace mtk
