#pragma once
// The One Billion Word benchmark (LM1B) on disk: finding its shards, reading them line by line with
// validation, and the folder `mtk-lm1b prepare` writes (vocabulary + token shards + manifest).
// docs/lm1b.md describes the layouts.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mtk {
namespace text {
class LineStream;
}

/// Counts of one or more text files read by LineReader. Skipped lines are never dropped silently:
/// each is counted by reason, and the first few are kept as "file:line: reason" examples.
struct LineStats {
  std::int64_t lines = 0;             ///< lines read (valid + skipped)
  std::int64_t valid = 0;             ///< lines returned
  std::int64_t words = 0;             ///< whitespace-separated words in the valid lines
  std::int64_t bytes = 0;             ///< bytes of the valid lines (without newlines)
  std::int64_t empty = 0;             ///< skipped: empty or only whitespace
  std::int64_t invalid_utf8 = 0;      ///< skipped: not valid UTF-8 (or a NUL byte)
  std::int64_t too_long = 0;          ///< skipped: longer than max_line_bytes
  std::vector<std::string> examples;  ///< the first skipped lines, "file:line: reason"

  std::int64_t skipped() const { return empty + invalid_utf8 + too_long; }
  /// Adds `other`'s counts (examples kept up to `max_examples`).
  void merge(const LineStats& other, std::size_t max_examples = 10);
  /// "12 skipped (3 empty, 4 invalid UTF-8, 5 longer than the limit)" or "0 skipped".
  std::string skipped_summary() const;
};

struct LineReaderOptions {
  /// Longer lines (without the newline) are skipped and counted.
  std::size_t max_line_bytes = 4096;
  /// A line that would be skipped is an error instead (naming file and line).
  bool strict = false;
  /// Skipped lines kept as examples in LineStats.
  std::size_t max_examples = 10;
  /// Non-empty: the file is JSON Lines, one object a line, and the text of a line is the string
  /// field of this name (newlines, CRs and tabs in it become spaces; null is an empty text). A
  /// line that is not a JSON object, or whose field is missing or not a string, is an error
  /// naming the file, the line and the field. The byte limit applies to the JSON line.
  std::string json_text_field;
};

/// Reads a UTF-8 text file (plain or gzip-compressed) with one sentence per line, or JSON Lines
/// (LineReaderOptions::json_text_field). Lines are
/// returned without the newline (a trailing CR is removed too); empty lines, invalid UTF-8 (or NUL
/// bytes) and lines longer than max_line_bytes are skipped and counted in stats(). Memory stays
/// bounded by max_line_bytes whatever the file holds. Errors (mtk::Error) name the file, and the
/// line where there is one: a missing or unreadable file, an empty file (0 bytes), a file without
/// any valid line, and in strict mode any line that would be skipped.
class LineReader {
 public:
  explicit LineReader(const std::string& path, const LineReaderOptions& options = {});
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  /// The next valid line; false at the end of the file.
  bool next(std::string& line);
  /// 1-based number of the line last returned.
  std::int64_t line_number() const { return line_number_; }
  const LineStats& stats() const { return stats_; }
  const std::string& path() const { return path_; }
  /// Bytes of the file read so far (compressed bytes of a gzip file), for progress.
  std::uint64_t file_offset() const;

 private:
  bool json_text(std::string& line);
  void skip(const std::string& reason, std::int64_t LineStats::*counter);
  std::string path_;
  LineReaderOptions options_;
  std::unique_ptr<text::LineStream> lines_;
  std::int64_t line_number_ = 0;
  LineStats stats_;
};

/// Offset of the first byte of `text` that is not valid UTF-8 (overlong forms, surrogates and code
/// points above U+10FFFF are invalid), or -1 when it is all valid.
std::int64_t find_invalid_utf8(const char* text, std::size_t size);
/// Whitespace-separated words of `text` (spaces and tabs), as LM1B counts words.
std::int64_t count_words(const char* text, std::size_t size);

/// The shards of an LM1B-layout corpus:
///   ROOT/training-monolingual.tokenized.shuffled/news.en-000NN-of-00100      NN = 01..99
///   ROOT/heldout-monolingual.tokenized.shuffled/news.en.heldout-000NN-of-00050 (00000 evaluated)
struct Lm1bCorpus {
  static constexpr int kTrainingShards = 99;  ///< shards 00001..00099 in the real data
  static constexpr const char* kTrainingDir = "training-monolingual.tokenized.shuffled";
  static constexpr const char* kHeldoutDir = "heldout-monolingual.tokenized.shuffled";

  std::string root;
  std::vector<int> training_numbers;         ///< 1, 2, ... in order
  std::vector<std::string> training_shards;  ///< their paths
  std::string heldout_shard;                 ///< path of news.en.heldout-00000-of-00050

  /// Finds the shards under `root`. The training shards present must be 00001..000NN without a gap
  /// (N >= 1); with `expected_training_shards` > 0 exactly that many are required. Errors name the
  /// missing folder or shard. Empty shards are found later, by LineReader.
  static Lm1bCorpus find(const std::string& root, int expected_training_shards = 0);
};

/// "news.en-00001-of-00100"
std::string lm1b_training_shard_name(int number);
/// "news.en.heldout-00000-of-00050"
std::string lm1b_heldout_shard_name(int number);

/// Up to `max_lines` valid lines from `shards` for vocabulary training: the first
/// ceil(max_lines / shards) valid lines of each shard (LM1B's shards are already shuffled, so this
/// is a random sample that reads only a little of each file). Skipped lines are added to `stats`.
/// With `keep`, only lines for which keep(shard index, line number) holds are taken (the training
/// side of a held-out split).
std::vector<std::string> sample_lines(
    const std::vector<std::string>& shards, std::int64_t max_lines,
    const LineReaderOptions& options, LineStats& stats,
    const std::function<bool(std::size_t, std::int64_t)>& keep = nullptr);

/// The folder `mtk-lm1b prepare --out DIR` writes, as the trainer reads it:
///   DIR/vocab.model                 SentencePiece model (mtk::Vocab::load)
///   DIR/vocab.pieces                the pieces as text, for humans
///   DIR/train/news.en-000NN-of-00100.tok, DIR/heldout/news.en.heldout-00000-of-00050.tok
///                                   token shards (mtk::TokenShard)
///   DIR/manifest.txt                written last: lists the files above (relative paths)
///   DIR/summary.json                counts of the run that wrote the manifest
struct Lm1bPrepared {
  std::string dir;
  std::string vocab_model;                   ///< path of vocab.model
  std::vector<std::string> training_shards;  ///< token shard paths, in shard order
  std::string heldout_shard;                 ///< token shard path of held-out shard 00000

  /// Reads DIR/manifest.txt; checks that the listed files exist. Errors say to run
  /// `mtk-lm1b prepare` when the manifest is missing (prepare not run or not finished).
  static Lm1bPrepared open(const std::string& dir);
  /// Writes DIR/manifest.txt atomically (paths stored relative to `dir`).
  void write_manifest() const;

  static std::string vocab_path(const std::string& dir);
  static std::string training_shard_path(const std::string& dir, int number);
  static std::string heldout_shard_path(const std::string& dir, int number = 0);
};

}  // namespace mtk
