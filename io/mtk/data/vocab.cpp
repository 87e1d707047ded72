#include <mtk/base/error.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unistd.h>
#include <unordered_map>

namespace mtk {

struct Vocab::Impl {
  sentencepiece::SentencePieceProcessor processor;
  std::string serialized;
  std::string origin;
  std::uint64_t fingerprint = 0;
};

namespace {

std::uint64_t fnv1a64(const std::string& bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return index_ >= lines_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return lines_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& lines_;
  std::size_t index_ = 0;
};

std::unordered_map<std::string, std::string> trainer_args(const VocabOptions& o) {
  const char* where = "mtk::Vocab::train";
  if (o.vocab_size < 8)
    fail(where, cat("vocab_size ", o.vocab_size, " is too small"));
  if (o.model_type != "unigram" && o.model_type != "bpe" && o.model_type != "word" &&
      o.model_type != "char")
    fail(where, cat("model_type '", o.model_type, "' is not unigram, bpe, word or char"));
  if (o.max_sentence_bytes <= 0)
    fail(where, "max_sentence_bytes must be positive");
  if (o.num_threads <= 0)
    fail(where, "num_threads must be positive");
  if (!(o.character_coverage > 0.0 && o.character_coverage <= 1.0))
    fail(where, cat("character_coverage ", o.character_coverage, " is not in (0, 1]"));
  return {
      {"vocab_size", std::to_string(o.vocab_size)},
      {"model_type", o.model_type},
      {"character_coverage", cat(o.character_coverage)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"max_sentence_length", std::to_string(o.max_sentence_bytes)},
      {"num_threads", std::to_string(o.num_threads)},
      {"pad_id", std::to_string(Vocab::kPadId)},
      {"eos_id", std::to_string(Vocab::kEosId)},
      {"unk_id", std::to_string(Vocab::kUnkId)},
      {"bos_id", "-1"},
      // Every sentence given is used: callers sample; SentencePiece must not sample again.
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"minloglevel", o.verbose ? "0" : "1"},
  };
}

// SentencePiece's random generator is a process-wide setting.
std::mutex& train_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

Vocab Vocab::train(const std::vector<std::string>& sentences, const VocabOptions& options) {
  if (sentences.empty())
    fail("mtk::Vocab::train", "no training sentences");
  auto args = trainer_args(options);
  std::string model;
  {
    std::lock_guard<std::mutex> lock(train_mutex());
    sentencepiece::SetRandomGeneratorSeed(options.seed);
    VectorIterator it(sentences);
    const auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
    if (!status.ok())
      fail("mtk::Vocab::train", cat("SentencePiece could not train a ", options.model_type,
                                    " vocabulary of ", options.vocab_size, " pieces on ",
                                    sentences.size(), " sentences: ", status.ToString()));
  }
  return from_serialized(model, "<trained>");
}

Vocab Vocab::train_from_file(const std::string& path, const VocabOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("mtk::Vocab::train_from_file", cat("cannot open '", path, "'"));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (!line.empty())
      lines.push_back(line);
  }
  if (lines.empty())
    fail("mtk::Vocab::train_from_file", cat("'", path, "' has no text"));
  try {
    return train(lines, options);
  } catch (const Error& e) {
    fail("mtk::Vocab::train_from_file", cat(path, ": ", e.what()));
  }
}

Vocab Vocab::from_serialized(const std::string& bytes, const std::string& origin) {
  const char* where = "mtk::Vocab::load";
  auto impl = std::make_shared<Impl>();
  const auto status = impl->processor.LoadFromSerializedProto(bytes);
  if (!status.ok())
    fail(where, cat(origin, ": not a SentencePiece model (", status.ToString(), ")"));
  const auto& p = impl->processor;
  if (p.pad_id() != kPadId || p.eos_id() != kEosId || p.unk_id() != kUnkId || p.bos_id() != -1)
    fail(where, cat(origin, ": reserved ids are pad ", p.pad_id(), ", eos ", p.eos_id(), ", unk ",
                    p.unk_id(), ", bos ", p.bos_id(), "; MTK vocabularies need pad 0, eos 1, unk ",
                    "2 and no bos (-1)"));
  impl->serialized = bytes;
  impl->origin = origin;
  impl->fingerprint = fnv1a64(bytes);
  Vocab v;
  v.impl_ = std::move(impl);
  return v;
}

Vocab Vocab::load(const std::string& path) {
  return from_serialized(read_whole_file(path, "mtk::Vocab::load"), path);
}

void Vocab::save(const std::string& path) const {
  const char* where = "mtk::Vocab::save";
  const Impl& m = impl();
  write_file_atomically(path, m.serialized, where);
}

void Vocab::save_pieces(const std::string& path) const {
  const Impl& m = impl();
  std::ofstream out(path, std::ios::trunc);
  if (!out)
    fail("mtk::Vocab::save_pieces", cat("cannot create '", path, "'"));
  for (int i = 0; i < size(); ++i)
    out << m.processor.IdToPiece(i) << '\t' << m.processor.GetScore(i) << '\n';
  if (!out)
    fail("mtk::Vocab::save_pieces", cat("cannot write '", path, "'"));
}

const Vocab::Impl& Vocab::impl() const {
  if (!impl_)
    fail("mtk::Vocab", "empty vocabulary (default-constructed): use Vocab::load or train");
  return *impl_;
}

const std::string& Vocab::serialized() const {
  return impl().serialized;
}
std::uint64_t Vocab::fingerprint() const {
  return impl().fingerprint;
}
int Vocab::size() const {
  return impl().processor.GetPieceSize();
}
const std::string& Vocab::origin() const {
  return impl().origin;
}

void Vocab::encode_append(const std::string& text, std::vector<std::int32_t>& ids) const {
  std::vector<int> out;
  const auto status = impl().processor.Encode(text, &out);
  if (!status.ok())
    fail("mtk::Vocab::encode",
         cat(impl().origin, ": cannot encode '", text.substr(0, 80), "': ", status.ToString()));
  ids.insert(ids.end(), out.begin(), out.end());
}

std::vector<std::int32_t> Vocab::encode(const std::string& text) const {
  std::vector<std::int32_t> ids;
  encode_append(text, ids);
  return ids;
}

std::string Vocab::decode(const std::vector<std::int32_t>& ids) const {
  const int n = size();
  std::vector<int> in;
  in.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (id < 0 || id >= n)
      fail("mtk::Vocab::decode", cat(impl().origin, ": id ", id, " is outside [0, ", n, ")"));
    in.push_back(id);
  }
  std::string text;
  const auto status = impl().processor.Decode(in, &text);
  if (!status.ok())
    fail("mtk::Vocab::decode", cat(impl().origin, ": ", status.ToString()));
  return text;
}

std::string Vocab::piece(std::int32_t id) const {
  if (id < 0 || id >= size())
    fail("mtk::Vocab::piece", cat(impl().origin, ": id ", id, " is outside [0, ", size(), ")"));
  return impl().processor.IdToPiece(id);
}

std::int32_t Vocab::id(const std::string& piece) const {
  return impl().processor.PieceToId(piece);
}

}  // namespace mtk
