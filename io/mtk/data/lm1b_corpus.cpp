#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/files/files.hpp>
#include <mtk/text/line_stream.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace mtk {

namespace fs = std::filesystem;

namespace {

std::string hex_byte(unsigned char c) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", c);
  return text;
}

std::string join_path(const std::string& a, const std::string& b) {
  return (fs::path(a) / fs::path(b)).string();
}

// "news.en-00007-of-00100" -> 7; "news.en.heldout-00000-of-00050" -> 0; otherwise -1.
int shard_number(const std::string& name, const std::string& prefix, const std::string& suffix) {
  if (name.size() != prefix.size() + 5 + suffix.size())
    return -1;
  if (name.compare(0, prefix.size(), prefix) != 0)
    return -1;
  if (name.compare(prefix.size() + 5, suffix.size(), suffix) != 0)
    return -1;
  int n = 0;
  for (std::size_t i = prefix.size(); i < prefix.size() + 5; ++i) {
    if (name[i] < '0' || name[i] > '9')
      return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LineStats

void LineStats::merge(const LineStats& o, std::size_t max_examples) {
  lines += o.lines;
  valid += o.valid;
  words += o.words;
  bytes += o.bytes;
  empty += o.empty;
  invalid_utf8 += o.invalid_utf8;
  too_long += o.too_long;
  for (const auto& e : o.examples)
    if (examples.size() < max_examples)
      examples.push_back(e);
}

std::string LineStats::skipped_summary() const {
  if (skipped() == 0)
    return "0 skipped";
  std::vector<std::string> parts;
  if (empty)
    parts.push_back(cat(empty, " empty"));
  if (invalid_utf8)
    parts.push_back(cat(invalid_utf8, " invalid UTF-8"));
  if (too_long)
    parts.push_back(cat(too_long, " longer than the limit"));
  std::string text = cat(skipped(), " skipped (");
  for (std::size_t i = 0; i < parts.size(); ++i)
    text += (i ? ", " : "") + parts[i];
  return text + ")";
}

// ---------------------------------------------------------------------------------------------
// UTF-8 and words

std::int64_t find_invalid_utf8(const char* text, std::size_t size) {
  const auto* s = reinterpret_cast<const unsigned char*>(text);
  std::size_t i = 0;
  while (i < size) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c == 0xE0) {
      n = 2, lo = 0xA0;  // no overlong 3-byte forms
    } else if (c >= 0xE1 && c <= 0xEC) {
      n = 2;
    } else if (c == 0xED) {
      n = 2, hi = 0x9F;  // no surrogates
    } else if (c >= 0xEE && c <= 0xEF) {
      n = 2;
    } else if (c == 0xF0) {
      n = 3, lo = 0x90;  // no overlong 4-byte forms
    } else if (c >= 0xF1 && c <= 0xF3) {
      n = 3;
    } else if (c == 0xF4) {
      n = 3, hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return static_cast<std::int64_t>(i);
    }
    if (i + n >= size)
      return static_cast<std::int64_t>(i);  // truncated sequence
    if (s[i + 1] < lo || s[i + 1] > hi)
      return static_cast<std::int64_t>(i);
    for (std::size_t k = 2; k <= n; ++k)
      if (s[i + k] < 0x80 || s[i + k] > 0xBF)
        return static_cast<std::int64_t>(i);
    i += n + 1;
  }
  return -1;
}

std::int64_t count_words(const char* text, std::size_t size) {
  std::int64_t words = 0;
  bool in_word = false;
  for (std::size_t i = 0; i < size; ++i) {
    const bool space = text[i] == ' ' || text[i] == '\t';
    if (!space && !in_word)
      ++words;
    in_word = !space;
  }
  return words;
}

// ---------------------------------------------------------------------------------------------
// LineReader

LineReader::LineReader(const std::string& path, const LineReaderOptions& options)
    : path_(path), options_(options) {
  const char* where = "mtk::LineReader";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail(where, cat("cannot open '", path, "': ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    fail(where, cat("'", path, "' is not a regular file"));
  if (st.st_size == 0)
    fail(where, cat("'", path, "' is empty (0 bytes)"));
  if (options_.max_line_bytes == 0)
    fail(where, "max_line_bytes must be positive");
  lines_ = std::make_unique<text::LineStream>(path, options_.max_line_bytes);
}

LineReader::~LineReader() = default;

void LineReader::skip(const std::string& reason, std::int64_t LineStats::*counter) {
  const std::string where = cat(path_, ":", line_number_, ": ", reason);
  if (options_.strict)
    fail("mtk::LineReader", where + " (strict mode: no line may be skipped)");
  ++(stats_.*counter);
  if (stats_.examples.size() < options_.max_examples)
    stats_.examples.push_back(where);
}

std::uint64_t LineReader::file_offset() const {
  return lines_->file_offset();
}

// The JSON line's text field in place of the line; false when it was skipped (a NUL in it).
bool LineReader::json_text(std::string& line) {
  const std::string& field = options_.json_text_field;
  const auto where = [&] { return cat(path_, ":", line_number_, ": "); };
  const auto record = nlohmann::json::parse(line, nullptr, false);
  if (record.is_discarded() || !record.is_object())
    fail("mtk::LineReader", cat(where(), "not a JSON object (JSON Lines: one object a line)"));
  const auto it = record.find(field);
  if (it == record.end()) {
    std::string keys;
    for (const auto& item : record.items())
      keys += (keys.empty() ? "" : ", ") + item.key();
    fail("mtk::LineReader", cat(where(), "no field \"", field, "\" (the object has ",
                                keys.empty() ? std::string("none") : keys,
                                "); name the text field with --text-field"));
  }
  if (it->is_null()) {
    line.clear();
    return true;
  }
  if (!it->is_string())
    fail("mtk::LineReader",
         cat(where(), "field \"", field, "\" is a ", it->type_name(), ", not a string"));
  line = it->get<std::string>();
  if (const void* nul = std::memchr(line.data(), '\0', line.size())) {
    skip(cat("NUL byte (\\u0000) at byte ", static_cast<const char*>(nul) - line.data() + 1,
             " of field \"", field, "\""),
         &LineStats::invalid_utf8);
    return false;
  }
  for (char& c : line)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  return true;
}

bool LineReader::next(std::string& line) {
  for (;;) {
    text::RawLine raw;
    if (!lines_->next(raw)) {
      if (stats_.valid == 0)
        fail("mtk::LineReader", cat("'", path_, "' has no valid line (", stats_.lines, " lines, ",
                                    stats_.skipped_summary(), ")"));
      return false;
    }
    line_number_ = lines_->line_number();
    ++stats_.lines;
    line = std::move(raw.text);
    if (raw.overlong) {
      skip(cat("line longer than ", options_.max_line_bytes, " bytes"), &LineStats::too_long);
      continue;
    }
    if (const void* nul = std::memchr(line.data(), '\0', line.size())) {
      skip(cat("NUL byte at byte ", static_cast<const char*>(nul) - line.data() + 1),
           &LineStats::invalid_utf8);
      continue;
    }
    const std::int64_t bad = find_invalid_utf8(line.data(), line.size());
    if (bad >= 0) {
      skip(cat("invalid UTF-8 at byte ", bad + 1, " (",
               hex_byte(static_cast<unsigned char>(line[static_cast<std::size_t>(bad)])), ")"),
           &LineStats::invalid_utf8);
      continue;
    }
    if (!options_.json_text_field.empty() && !json_text(line))
      continue;
    const std::int64_t words = count_words(line.data(), line.size());
    if (words == 0) {
      skip("empty line", &LineStats::empty);
      continue;
    }
    ++stats_.valid;
    stats_.words += words;
    stats_.bytes += static_cast<std::int64_t>(line.size());
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// Lm1bCorpus

std::string lm1b_training_shard_name(int number) {
  char name[64];
  std::snprintf(name, sizeof name, "news.en-%05d-of-00100", number);
  return name;
}

std::string lm1b_heldout_shard_name(int number) {
  char name[64];
  std::snprintf(name, sizeof name, "news.en.heldout-%05d-of-00050", number);
  return name;
}

Lm1bCorpus Lm1bCorpus::find(const std::string& root, int expected_training_shards) {
  const char* where = "mtk::Lm1bCorpus::find";
  const std::string layout =
      cat("an LM1B-layout corpus has ", kTrainingDir, "/news.en-000NN-of-00100 (NN = 01..99) and ",
          kHeldoutDir, "/", lm1b_heldout_shard_name(0));
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    fail(where, cat("no folder '", root, "' (", layout, ")"));
  Lm1bCorpus c;
  c.root = root;
  const std::string train_dir = join_path(root, kTrainingDir);
  const std::string heldout_dir = join_path(root, kHeldoutDir);
  if (!fs::is_directory(train_dir, ec))
    fail(where, cat("no folder '", train_dir, "' (", layout, ")"));
  if (!fs::is_directory(heldout_dir, ec))
    fail(where, cat("no folder '", heldout_dir, "' (", layout, ")"));

  std::vector<int> numbers;
  for (const auto& entry : fs::directory_iterator(train_dir, ec)) {
    const int n = shard_number(entry.path().filename().string(), "news.en-", "-of-00100");
    if (n >= 1 && n <= kTrainingShards)
      numbers.push_back(n);
  }
  if (ec)
    fail(where, cat("cannot list '", train_dir, "': ", ec.message()));
  std::sort(numbers.begin(), numbers.end());
  if (numbers.empty())
    fail(where, cat("no training shard in '", train_dir, "' (expected ",
                    lm1b_training_shard_name(1), " ...)"));
  for (std::size_t i = 0; i < numbers.size(); ++i)
    if (numbers[i] != static_cast<int>(i) + 1)
      fail(where,
           cat("missing training shard '",
               join_path(train_dir, lm1b_training_shard_name(static_cast<int>(i) + 1)), "' (found ",
               numbers.size(), " shards up to ", lm1b_training_shard_name(numbers.back()),
               "; the shards used must be 00001..000NN without a gap)"));
  if (expected_training_shards > 0) {
    if (expected_training_shards > kTrainingShards)
      fail(where, cat("expected_training_shards is ", expected_training_shards, "; LM1B has ",
                      kTrainingShards));
    if (static_cast<int>(numbers.size()) < expected_training_shards)
      fail(where,
           cat("missing training shard '",
               join_path(train_dir, lm1b_training_shard_name(static_cast<int>(numbers.size()) + 1)),
               "' (", expected_training_shards, " expected, found ", numbers.size(), ")"));
    numbers.resize(static_cast<std::size_t>(expected_training_shards));
  }
  for (int n : numbers) {
    c.training_numbers.push_back(n);
    c.training_shards.push_back(join_path(train_dir, lm1b_training_shard_name(n)));
  }
  c.heldout_shard = join_path(heldout_dir, lm1b_heldout_shard_name(0));
  if (!fs::is_regular_file(c.heldout_shard, ec))
    fail(where,
         cat("missing held-out shard '", c.heldout_shard, "' (evaluation uses shard 00000)"));
  return c;
}

std::vector<std::string> sample_lines(const std::vector<std::string>& shards,
                                      std::int64_t max_lines, const LineReaderOptions& options,
                                      LineStats& stats,
                                      const std::function<bool(std::size_t, std::int64_t)>& keep) {
  std::vector<std::string> out;
  if (shards.empty() || max_lines <= 0)
    return out;
  const auto n = static_cast<std::int64_t>(shards.size());
  const std::int64_t quota = (max_lines + n - 1) / n;
  std::string line;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    LineReader reader(shards[i], options);
    std::int64_t taken = 0;
    while (taken < quota && static_cast<std::int64_t>(out.size()) < max_lines &&
           reader.next(line)) {
      if (keep && !keep(i, reader.line_number()))
        continue;
      out.push_back(line);
      ++taken;
    }
    stats.merge(reader.stats(), options.max_examples);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Lm1bPrepared

std::string Lm1bPrepared::vocab_path(const std::string& dir) {
  return join_path(dir, "vocab.model");
}

std::string Lm1bPrepared::training_shard_path(const std::string& dir, int number) {
  return join_path(join_path(dir, "train"), lm1b_training_shard_name(number) + ".tok");
}

std::string Lm1bPrepared::heldout_shard_path(const std::string& dir, int number) {
  return join_path(join_path(dir, "heldout"), lm1b_heldout_shard_name(number) + ".tok");
}

namespace {
constexpr const char* kManifestHeader = "# mtk-lm1b prepared data, manifest version 1";

std::string relative_to(const std::string& path, const std::string& dir) {
  const std::string rel = fs::path(path).lexically_relative(dir).string();
  return rel.empty() || rel.compare(0, 2, "..") == 0 ? path : rel;
}
}  // namespace

void Lm1bPrepared::write_manifest() const {
  std::ostringstream os;
  os << kManifestHeader << "\n";
  os << "vocab " << relative_to(vocab_model, dir) << "\n";
  for (const auto& s : training_shards)
    os << "train " << relative_to(s, dir) << "\n";
  os << "heldout " << relative_to(heldout_shard, dir) << "\n";
  write_file_atomically(join_path(dir, "manifest.txt"), os.str(),
                        "mtk::Lm1bPrepared::write_manifest");
}

Lm1bPrepared Lm1bPrepared::open(const std::string& dir) {
  const char* where = "mtk::Lm1bPrepared::open";
  const std::string manifest = join_path(dir, "manifest.txt");
  std::ifstream in(manifest);
  if (!in)
    fail(where, cat("no '", manifest,
                    "': the folder was not written by `mtk-lm1b prepare`, or "
                    "prepare did not finish; run `mtk-lm1b prepare --data CORPUS --out ",
                    dir, "`"));
  Lm1bPrepared p;
  p.dir = dir;
  std::string line;
  int number = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      header = line == kManifestHeader;
      if (!header)
        fail(where, cat(manifest, ":1: not an MTK manifest (expected '", kManifestHeader, "')"));
      continue;
    }
    if (line.empty() || line[0] == '#')
      continue;
    const auto space = line.find(' ');
    const std::string key = line.substr(0, space);
    const std::string value = space == std::string::npos ? "" : line.substr(space + 1);
    if (value.empty())
      fail(where, cat(manifest, ":", number, ": '", key, "' without a path"));
    const std::string path = fs::path(value).is_absolute() ? value : join_path(dir, value);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      fail(where, cat(manifest, ":", number, ": listed file '", path, "' is missing; ",
                      prepare_again_advice(manifest, "mtk-lm1b prepare")));
    if (key == "vocab") {
      p.vocab_model = path;
    } else if (key == "train") {
      p.training_shards.push_back(path);
    } else if (key == "heldout") {
      p.heldout_shard = path;
    } else {
      fail(where, cat(manifest, ":", number, ": unknown entry '", key, "'"));
    }
  }
  if (!header)
    fail(where, cat("'", manifest, "' is empty"));
  if (p.vocab_model.empty())
    fail(where, cat(manifest, ": no 'vocab' entry"));
  if (p.training_shards.empty())
    fail(where, cat(manifest, ": no 'train' entry"));
  if (p.heldout_shard.empty())
    fail(where, cat(manifest, ": no 'heldout' entry"));
  return p;
}

}  // namespace mtk
