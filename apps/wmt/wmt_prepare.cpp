// mtk-wmt prepare: training pairs -> one shared SentencePiece vocabulary and source/target token
// shards (docs/wmt.md). Rank 0 does the work; every rank agrees on failure.

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/data/wmt_pairs.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/text/line_pairs.hpp>
#include <mtk/text/sgm.hpp>

#include "cli.hpp"
#include "training.hpp"
#include "wmt_commands.hpp"
#include "wmt_config.hpp"
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>

namespace mtk::wmt {
namespace {

namespace fs = std::filesystem;
const char* const kTool = "mtk-wmt prepare";

// PREFIX.lang, else PREFIX.lang.gz.
std::string pair_file(const std::string& prefix, const std::string& lang) {
  const std::string plain = prefix + "." + lang;
  if (fs::exists(plain))
    return plain;
  if (fs::exists(plain + ".gz"))
    return plain + ".gz";
  fail(kTool, cat("training file '", plain, "' (or '", plain, ".gz') does not exist"));
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  for (char c : text + ",") {
    if (c == ',') {
      while (!item.empty() && item.back() == ' ')
        item.pop_back();
      if (!item.empty())
        out.push_back(item);
      item.clear();
    } else if (c != ' ' || !item.empty()) {
      item += c;
    }
  }
  return out;
}

// The data section, and its training prefixes as a list.
struct PrepareSettings : DataSettings {
  std::vector<std::string> prefixes;
};

PrepareSettings read_prepare_settings(const Config& c) {
  c.require_section("data");
  PrepareSettings s;
  static_cast<DataSettings&>(s) = read_data_settings(c);
  s.prefixes = split_list(s.train);
  if (s.dir.empty() || s.prefixes.empty())
    fail(kTool, cat(c.origin(),
                    ": data.dir and data.train (comma-separated PREFIXes of "
                    "PREFIX.<source> / PREFIX.<target>) are required"));
  return s;
}

// Why a pair is skipped; counted per reason.
enum Reason { kEmptySource, kEmptyTarget, kInvalidUtf8, kTooManyBytes, kTooManyTokens, kReasons };
const char* const kReasonNames[kReasons] = {"empty_source", "empty_target", "invalid_utf8",
                                            "too_many_bytes", "too_many_tokens"};

// The reason the pair `src`/`tgt` is skipped before encoding, or -1. A NUL byte counts as invalid
// UTF-8, as mtk-lm1b counts it.
int text_reason(const text::RawLine& src, const text::RawLine& tgt) {
  auto blank = [](const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; };
  auto invalid = [](const std::string& s) {
    return std::memchr(s.data(), '\0', s.size()) != nullptr ||
           find_invalid_utf8(s.data(), s.size()) >= 0;
  };
  if (src.overlong || tgt.overlong)
    return kTooManyBytes;
  if (blank(src.text))
    return kEmptySource;
  if (blank(tgt.text))
    return kEmptyTarget;
  if (invalid(src.text) || invalid(tgt.text))
    return kInvalidUtf8;
  return -1;
}

// Calls fn(source, target) for every line pair of PREFIX: line N of one file always with line N of
// the other, at most max_line_bytes kept of a line (text::LinePairs). Files of different line
// counts are an error naming both files and both counts.
void for_each_pair(const PrepareSettings& s, const std::string& prefix,
                   const std::function<void(const text::RawLine&, const text::RawLine&)>& fn) {
  text::LinePairs pairs(pair_file(prefix, s.source), pair_file(prefix, s.target),
                        static_cast<std::size_t>(s.max_line_bytes));
  text::RawLine a, b;
  while (pairs.next(a, b))
    fn(a, b);
}

TokenShardInfo shard_info(const Vocab& vocab) {
  TokenShardInfo info;
  info.vocab_size = vocab.size();
  info.eos_id = Vocab::kEosId;
  info.vocab_fingerprint = vocab.fingerprint();
  return info;
}

// The dev set's segments (source and reference, whole); the test set is only checked.
struct DevSet {
  std::vector<std::string> src, ref;
};

// The .sgm sets, read first: a malformed file fails before the long steps. Streamed, with the
// training pairs' limit: a segment over data.max_line_bytes is an error (memory stays bounded).
DevSet read_eval_sets(const PrepareSettings& s) {
  DevSet dev;
  if (!s.dev_source.empty()) {
    const auto limit = static_cast<std::size_t>(s.max_line_bytes);
    dev.src = text::read_text_lines(s.dev_source, true, limit, "data.max_line_bytes");
    dev.ref = text::read_text_lines(s.dev_reference, true, limit, "data.max_line_bytes");
    if (dev.src.size() != dev.ref.size())
      fail(kTool, cat("dev set: '", s.dev_source, "' has ", dev.src.size(), " segments but '",
                      s.dev_reference, "' has ", dev.ref.size()));
  }
  if (!s.test_source.empty()) {
    const auto limit = static_cast<std::size_t>(s.max_line_bytes);
    const auto a = text::read_text_lines(s.test_source, true, limit, "data.max_line_bytes");
    const auto b = text::read_text_lines(s.test_reference, false, limit, "data.max_line_bytes");
    if (a.size() != b.size())
      fail(kTool, cat("test set: '", s.test_source, "' has ", a.size(), " segments but '",
                      s.test_reference, "' has ", b.size()));
  }
  return dev;
}

// What the vocabulary depends on, as one line (DIR/vocab.settings): the data settings that choose
// and train it, and the size of the training text.
std::string vocab_settings(const PrepareSettings& s) {
  std::uint64_t bytes = 0;
  for (const auto& prefix : s.prefixes)
    for (const auto& lang : {s.source, s.target})
      bytes += fs::file_size(pair_file(prefix, lang));
  return cat("mtk-wmt vocabulary settings v1: data.vocab_size=", s.vocab_size,
             " data.model_type=", s.model_type, " data.max_line_bytes=", s.max_line_bytes,
             " data.vocab_sample_pairs=", s.vocab_sample_pairs, " data.source=", s.source,
             " data.target=", s.target, " training_files=", s.prefixes.size(),
             " training_bytes=", bytes, "\n");
}

// The command that prepares data.dir again with these settings, each spelled out (paths
// absolute): what DIR/prepare.command records and the damaged-shard advice names.
std::string prepare_command(const PrepareSettings& s, const std::string& config_path) {
  const auto abs = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
  std::string train;
  for (const auto& prefix : s.prefixes)
    train += (train.empty() ? "" : ",") + abs(prefix);
  std::string cmd = "mtk-wmt prepare";
  if (!config_path.empty())
    cmd += " --config " + shell_quote(abs(config_path));
  const auto set = [&](const std::string& key, const std::string& value) {
    if (!value.empty())
      cmd += " --set " + shell_quote(cat("data.", key, "=", value));
  };
  set("dir", abs(s.dir));
  set("train", train);
  set("source", s.source);
  set("target", s.target);
  for (const auto& [key, value] : {std::pair<const char*, std::string>{"dev.source", s.dev_source},
                                   {"dev.reference", s.dev_reference},
                                   {"test.source", s.test_source},
                                   {"test.reference", s.test_reference}})
    set(key, value.empty() ? value : abs(value));
  set("vocab_size", std::to_string(s.vocab_size));
  set("model_type", s.model_type);
  set("max_length", std::to_string(s.max_length));
  set("max_line_bytes", std::to_string(s.max_line_bytes));
  set("vocab_sample_pairs", std::to_string(s.vocab_sample_pairs));
  return cmd;
}

// Refuses (without --force) to replace the vocabulary of a folder prepared with other settings:
// every checkpoint trained on it would then be refused. Names each differing setting, there and
// now, and the command that keeps the folder's own. True when the folder's vocabulary is current.
bool check_prepared_settings(const PrepareSettings& s, const PreparedPaths& out,
                             const std::string& settings, bool force) {
  const std::string settings_path = s.dir + "/vocab.settings";
  if (!fs::exists(out.vocab()))
    return false;
  const std::string old =
      fs::is_regular_file(settings_path) ? read_whole_file(settings_path, kTool) : "";
  if (old == settings)
    return !force;
  if (force)
    return false;
  const auto before = settings_words(old);
  std::string diffs;
  for (const auto& [key, value] : settings_words(settings)) {
    std::string was = "(not recorded)";
    for (const auto& [k, v] : before)
      if (k == key)
        was = v;
    if (was != value)
      diffs += cat(diffs.empty() ? "" : "; ",
                   key == "training_bytes"   ? std::string("the training text (bytes)")
                   : key == "training_files" ? std::string("the training file pairs")
                                             : key,
                   " ", was, " there, ", value, " now");
  }
  const std::string keep = recorded_prepare_command(s.dir);
  fail(kTool,
       cat("'", s.dir, "' was prepared with other settings: ",
           old.empty() ? cat("its vocabulary's settings are not recorded (no ", settings_path, ")")
                       : diffs,
           ". Preparing it with these would train a new vocabulary over ", out.vocab(),
           ", and every checkpoint trained on the old one would be refused",
           keep.empty() ? std::string(".") : cat(". To keep it, run `", keep, "`"),
           "; to replace it, give --force (or another data.dir)"));
}

// The vocabulary, on both languages of the first usable pairs (checks alignment too), saved under
// data.dir; `lines` receives the number of training pairs read.
Vocab train_vocabulary(const PrepareSettings& s, const PreparedPaths& out, std::int64_t& lines) {
  std::vector<std::string> sample;
  lines = 0;
  for (const auto& prefix : s.prefixes)
    for_each_pair(s, prefix, [&](const text::RawLine& a, const text::RawLine& b) {
      ++lines;
      if (static_cast<std::int64_t>(sample.size()) < 2 * s.vocab_sample_pairs &&
          text_reason(a, b) < 0) {
        sample.push_back(a.text);
        sample.push_back(b.text);
      }
    });
  if (sample.empty())
    fail(kTool, cat("no usable training pair in ", lines, " lines of ", s.prefixes.size(),
                    " training file pairs"));
  app::say(cat("prepare: vocabulary: training a ", s.model_type, " model of ", s.vocab_size,
               " pieces on ", sample.size() / 2, " pairs (", s.source, " + ", s.target, ")\n"));
  VocabOptions vo;
  vo.vocab_size = s.vocab_size;
  vo.model_type = s.model_type;
  vo.max_sentence_bytes = static_cast<int>(s.max_line_bytes);
  Vocab vocab = Vocab::train(sample, vo);
  sample.clear();
  vocab.save(out.vocab());
  vocab.save_pieces(s.dir + "/vocab.pieces");
  return vocab;
}

// What encoding the training pairs kept and skipped.
struct TrainingCounts {
  std::int64_t skipped[kReasons] = {}, kept = 0, src_tokens = 0, tgt_tokens = 0;
};

// The token shards of the training pairs, and the skipped ones by reason (`lines` receives the
// pairs read).
TrainingCounts encode_training(const PrepareSettings& s, const PreparedPaths& out,
                               const Vocab& vocab, std::int64_t& lines) {
  TrainingCounts n;
  lines = 0;
  TokenShardWriter src_writer(out.source("train"), shard_info(vocab));
  TokenShardWriter tgt_writer(out.target("train"), shard_info(vocab));
  std::vector<std::int32_t> a_ids, b_ids;
  for (const auto& prefix : s.prefixes)
    for_each_pair(s, prefix, [&](const text::RawLine& a, const text::RawLine& b) {
      ++lines;
      int reason = text_reason(a, b);
      if (reason < 0) {
        a_ids = vocab.encode(a.text);
        b_ids = vocab.encode(b.text);
        // + EOS on each side
        if (static_cast<std::int64_t>(std::max(a_ids.size(), b_ids.size())) + 1 > s.max_length)
          reason = kTooManyTokens;
      }
      if (reason >= 0) {
        ++n.skipped[reason];
        return;
      }
      src_writer.add_sentence(a_ids, count_words(a.text.data(), a.text.size()));
      tgt_writer.add_sentence(b_ids, count_words(b.text.data(), b.text.size()));
      n.src_tokens += static_cast<std::int64_t>(a_ids.size()) + 1;
      n.tgt_tokens += static_cast<std::int64_t>(b_ids.size()) + 1;
      ++n.kept;
    });
  if (n.kept == 0)
    fail(kTool, cat("every one of the ", lines, " training pairs was skipped"));
  src_writer.finish();
  tgt_writer.finish();
  return n;
}

// The dev pairs, whole (translate reads the .sgm files themselves).
void encode_dev(const PreparedPaths& out, const Vocab& vocab, const DevSet& dev) {
  if (dev.src.empty())
    return;
  TokenShardWriter src_writer(out.source("dev"), shard_info(vocab));
  TokenShardWriter tgt_writer(out.target("dev"), shard_info(vocab));
  for (std::size_t i = 0; i < dev.src.size(); ++i) {
    src_writer.add_sentence(vocab.encode(dev.src[i]), 0);
    tgt_writer.add_sentence(vocab.encode(dev.ref[i]), 0);
  }
  src_writer.finish();
  tgt_writer.finish();
}

// summary.json and the report on stdout.
void write_summary(const PrepareSettings& s, const PreparedPaths& out, const Vocab& vocab,
                   std::int64_t lines, const TrainingCounts& n, const DevSet& dev) {
  std::int64_t total_skipped = 0;
  std::string reasons;
  MetricRecord summary = {{"vocab_size", std::int64_t{vocab.size()}},
                          {"source", s.source},
                          {"target", s.target},
                          {"training_lines", lines},
                          {"training_pairs", n.kept},
                          {"source_tokens", n.src_tokens},
                          {"target_tokens", n.tgt_tokens},
                          {"max_length", s.max_length},
                          {"dev_pairs", static_cast<std::int64_t>(dev.src.size())}};
  for (int r = 0; r < kReasons; ++r) {
    total_skipped += n.skipped[r];
    reasons += cat(r ? ", " : "", kReasonNames[r], " ", n.skipped[r]);
    summary.push_back({cat("skipped_", kReasonNames[r]), n.skipped[r]});
  }
  MetricsWriter(out.summary(), true).write(summary);
  app::say(cat("prepare: done -> ", s.dir, "\n  vocabulary: ", vocab.size(), " pieces (",
               s.model_type, ")\n  training: ", n.kept, " pairs of ", lines, " (", n.src_tokens,
               " ", s.source, " + ", n.tgt_tokens, " ", s.target, " tokens incl. EOS); skipped ",
               total_skipped, ": ", reasons, "\n  dev: ", dev.src.size(), " pairs\n"));
}

void run(const PrepareSettings& s, const std::string& config_path, bool force) {
  const PreparedPaths out{s.dir};
  // Before anything in the folder changes: other settings than its own need --force.
  const std::string settings = vocab_settings(s);
  const bool current = check_prepared_settings(s, out, settings, force);
  make_directories(s.dir, "mtk::make_directories");
  const DevSet dev = read_eval_sets(s);
  std::int64_t lines = 0;
  Vocab vocab;
  if (current) {
    vocab = Vocab::load(out.vocab());
    app::say(cat("prepare: vocabulary ", out.vocab(), " is current (same settings): reused\n"));
  } else {
    fs::remove(s.dir + "/vocab.settings");
    vocab = train_vocabulary(s, out, lines);
    write_file_atomically(s.dir + "/vocab.settings", settings, kTool);
  }
  write_prepare_command(s.dir, prepare_command(s, config_path));
  const TrainingCounts counts = encode_training(s, out, vocab, lines);
  encode_dev(out, vocab, dev);
  write_summary(s, out, vocab, lines, counts, dev);
}

}  // namespace

int prepare_main(const Communicator& world, const std::vector<std::string>& args) {
  CLI::App app{
      "Trains one SentencePiece vocabulary on both languages of the training pairs and "
      "encodes the pairs into a source and a target token shard (docs/wmt.md).",
      kTool};
  cli::configure(app);
  app::RunOptions o;
  bool force = false;
  app.add_option("--config", o.config_path, "The YAML config (its data section)")
      ->required()
      ->type_name("FILE");
  app.add_option("--set", o.sets, "Overrides one setting (repeatable), e.g. data.vocab_size=8000")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all();
  app.add_flag("--force", force,
               "Train the vocabulary again even where data.dir holds one of the same settings; "
               "needed to prepare a folder again with other settings than its own (its vocabulary "
               "is replaced, and checkpoints trained on the old one are refused)");
  if (const int status = cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  try {
    agree_on_failure(world, [&] {
      app::load_config(o);
      const PrepareSettings s = read_prepare_settings(o.config);
      if (world.rank() == 0)
        run(s, o.config_path, force);
    });
  } catch (const std::exception& e) {
    if (world.rank() == 0)
      std::fprintf(stderr, "%s: error: %s\n", kTool, e.what());
    return 1;
  }
  return 0;
}

}  // namespace mtk::wmt
