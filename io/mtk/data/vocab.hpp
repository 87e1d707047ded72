#pragma once
// Subword vocabularies: a SentencePiece model (unigram by default) trained offline from text, with
// encode / decode. SentencePiece stays inside io/: none of its types appear here.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mtk {

/// How a vocabulary is trained. The reserved ids are fixed for every MTK vocabulary (see Vocab).
struct VocabOptions {
  /// Number of pieces including the reserved ones (and the 256 byte pieces with byte_fallback).
  int vocab_size = 32000;
  /// "unigram" (default), "bpe", "word" or "char".
  std::string model_type = "unigram";
  /// Fraction of the characters of the training text the model covers with its own pieces;
  /// the rarest rest is spelled with byte pieces (byte_fallback) or mapped to <unk>.
  double character_coverage = 0.9995;
  /// Spell characters outside the vocabulary as UTF-8 bytes (<0xE2>...) instead of <unk>, so that
  /// every text has an exact encoding and no probability mass hides in <unk>.
  bool byte_fallback = true;
  /// Longest training sentence in bytes; SentencePiece would drop longer ones, so MTK's readers
  /// reject (and count) them first with the same limit.
  int max_sentence_bytes = 4096;
  /// Trainer threads. The trained model is deterministic for a given thread count.
  int num_threads = 1;
  /// Seed of SentencePiece's random generator.
  unsigned int seed = 1;
  /// Print SentencePiece's training log to stderr (off: warnings and errors only).
  bool verbose = false;
};

/// A SentencePiece vocabulary with MTK's reserved ids:
///   0 <pad>  padding, and the "previous token" at the start of each packed sentence
///   1 </s>   end of sentence, appended after every sentence by the token shards
///   2 <unk>  unknown (never produced when byte_fallback is on, except for invalid input)
/// There is no beginning-of-sentence id (bos = -1) and no user-defined symbol. Copies share one
/// immutable model; encode/decode are thread-safe.
class Vocab {
 public:
  static constexpr std::int32_t kPadId = 0;
  static constexpr std::int32_t kEosId = 1;
  static constexpr std::int32_t kUnkId = 2;

  /// Trains on `sentences` (one sentence each, UTF-8, at most max_sentence_bytes bytes).
  static Vocab train(const std::vector<std::string>& sentences, const VocabOptions& options);
  /// Trains on a text file with one sentence per line (lines are not validated here: use
  /// mtk::LineReader for untrusted text).
  static Vocab train_from_file(const std::string& path, const VocabOptions& options);
  /// Loads a model written by save() (or any SentencePiece .model file with MTK's reserved ids).
  static Vocab load(const std::string& path);
  /// Loads a model from the bytes of a .model file (see serialized()).
  static Vocab from_serialized(const std::string& bytes, const std::string& origin = "<bytes>");

  /// Writes the .model file (atomically: a temporary file renamed into place).
  void save(const std::string& path) const;
  /// Writes the pieces and their scores as text, one "piece<TAB>score" per line (for humans).
  void save_pieces(const std::string& path) const;
  /// The bytes of the .model file.
  const std::string& serialized() const;
  /// FNV-1a 64 of serialized(): token files record it so a changed vocabulary is noticed.
  std::uint64_t fingerprint() const;

  int size() const;
  /// Ids of `text` (no end-of-sentence appended).
  std::vector<std::int32_t> encode(const std::string& text) const;
  /// Appends the ids of `text` to `ids` (no end-of-sentence appended).
  void encode_append(const std::string& text, std::vector<std::int32_t>& ids) const;
  /// Text of `ids`; <pad> and </s> produce nothing, so decode(encode(t)) == t for normalised t.
  std::string decode(const std::vector<std::int32_t>& ids) const;
  /// The piece of `id` ("▁the", "<0xC3>", "</s>").
  std::string piece(std::int32_t id) const;
  /// Id of `piece`, or kUnkId.
  std::int32_t id(const std::string& piece) const;
  /// Where the model came from (a path, or "<trained>").
  const std::string& origin() const;

 private:
  struct Impl;
  const Impl& impl() const;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace mtk
