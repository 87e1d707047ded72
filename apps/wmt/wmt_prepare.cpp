// SPDX-License-Identifier: Apache-2.0
// mtk-wmt prepare: training pairs -> one shared SentencePiece vocabulary and source/target token
// shards (docs/wmt.md). Rank 0 reads the dev and test sets and trains the vocabulary; the items
// of data.train are encoded over all ranks (wmt_prepare_encode.cpp); every rank agrees on failure.

#include "wmt_prepare.hpp"

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/progress_line.hpp>
#include <mtk/data/rank_jobs.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/text/sgm.hpp>

#include "cli.hpp"
#include "training.hpp"
#include "wmt_commands.hpp"
#include "wmt_config.hpp"
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <tuple>

namespace mtk::wmt {
namespace {

namespace fs = std::filesystem;
const char* const kTool = "mtk-wmt prepare";

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

// The data section, and its items resolved to their files (on every rank: each checks that it
// sees them).
PrepareSettings read_prepare_settings(const Config& c) {
  c.require_section("data");
  PrepareSettings s;
  static_cast<DataSettings&>(s) = read_data_settings(c);
  const auto items = split_list(s.train);
  if (s.dir.empty() || items.empty())
    fail(kTool, cat(c.origin(),
                    ": data.dir and data.train (comma-separated items: PREFIX for "
                    "PREFIX.<source> / PREFIX.<target>, FILE.tsv, or SOURCE|TARGET) are required"));
  for (const auto& [tsv, a, b, name] :
       {std::tuple{s.dev_tsv, s.dev_source, s.dev_reference, "dev"},
        std::tuple{s.test_tsv, s.test_source, s.test_reference, "test"}})
    if (!tsv.empty() && (!a.empty() || !b.empty()))
      fail(kTool, cat(c.origin(), ": data.", name, ".tsv and data.", name, ".source/reference ",
                      "both given: a set is one TSV or a source and a reference file"));
  if (s.test_fraction > 0 && (!s.test_tsv.empty() || !s.test_source.empty()))
    fail(kTool, cat(c.origin(),
                    ": data.test.fraction and a test file both given: the test set "
                    "is held out of data.train or read from files, not both"));
  for (const auto& item : items)
    s.sources.push_back(resolve_pair_source(item, s.source, s.target, "data.train"));
  return s;
}

// An evaluation set's sentences and references.
struct EvalSet {
  std::vector<std::string> src, ref;
};

// A set in one TSV file, whole: a line without exactly one TAB, or longer than the limit, is an
// error naming the file and the line.
EvalSet read_tsv_set(const std::string& path, std::size_t limit, const std::string& setting) {
  PairSource source;
  source.kind = PairSource::Kind::tsv;
  source.item = source.source_path = source.target_path = path;
  PairReader pairs(source, limit);
  EvalSet set;
  text::RawLine a, b;
  bool malformed = false;
  while (pairs.next(a, b, malformed)) {
    const std::string at = cat(setting, ": ", path, ":", pairs.line_number(), ": ");
    if (malformed)
      fail(kTool, at + "not source<TAB>target (a line needs exactly one TAB)");
    if (a.overlong || b.overlong)
      fail(kTool,
           cat(at, "a side longer than the limit of ", limit, " bytes (data.max_line_bytes)"));
    set.src.push_back(std::move(a.text));
    set.ref.push_back(std::move(b.text));
  }
  if (set.src.empty())
    fail(kTool, cat(setting, ": '", path, "' has no pair"));
  return set;
}

// A set of a source and a reference file (.sgm or text), or of one TSV; empty when not given.
EvalSet read_eval_set(const std::string& tsv, const std::string& source,
                      const std::string& reference, const std::string& name, std::size_t limit) {
  if (!tsv.empty())
    return read_tsv_set(tsv, limit, cat("data.", name, ".tsv"));
  EvalSet set;
  if (source.empty())
    return set;
  set.src = text::read_text_lines(source, true, limit, "data.max_line_bytes");
  set.ref = text::read_text_lines(reference, name == "dev", limit, "data.max_line_bytes");
  if (set.src.size() != set.ref.size())
    fail(kTool, cat(name, " set: '", source, "' has ", set.src.size(), " segments but '", reference,
                    "' has ", set.ref.size()));
  return set;
}

// The sides of a TSV set as the text files translate reads (--input, --reference).
void write_tsv_sides(const std::string& dir, const std::string& name, const EvalSet& set) {
  for (const auto& [suffix, lines] : {std::pair{"source", &set.src}, {"reference", &set.ref}}) {
    std::string text;
    for (const auto& line : *lines)
      text += line + "\n";
    write_file_atomically(cat(dir, "/", name, ".", suffix, ".txt"), text, kTool);
  }
}

// What the vocabulary depends on, as one line (DIR/vocab.settings): the data settings that choose
// and train it, and the size of the training text.
std::string vocab_settings(const PrepareSettings& s) {
  std::uint64_t bytes = 0;
  for (const auto& source : s.sources)
    bytes += source.bytes();
  return cat(
      "mtk-wmt vocabulary settings v1: data.vocab_size=", s.vocab_size,
      " data.model_type=", s.model_type, " data.max_line_bytes=", s.max_line_bytes,
      " data.vocab_sample_pairs=", s.vocab_sample_pairs, " data.source=", s.source,
      " data.target=", s.target, " training_files=", s.sources.size(), " training_bytes=", bytes,
      s.test_fraction > 0 ? cat(" data.test.fraction=", s.test_fraction) : std::string(), "\n");
}

// The command that prepares data.dir again with these settings, each spelled out (paths
// absolute): what DIR/prepare.command records and the damaged-shard advice names.
std::string prepare_command(const PrepareSettings& s, const std::string& config_path) {
  const auto abs = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
  std::string train;
  for (const auto& source : s.sources)
    train += (train.empty() ? "" : ",") +
             (source.kind == PairSource::Kind::files
                  ? cat(abs(source.source_path), "|", abs(source.target_path))
                  : abs(source.item));
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
                                   {"dev.tsv", s.dev_tsv},
                                   {"test.source", s.test_source},
                                   {"test.reference", s.test_reference},
                                   {"test.tsv", s.test_tsv}})
    set(key, value.empty() ? value : abs(value));
  set("vocab_size", std::to_string(s.vocab_size));
  set("model_type", s.model_type);
  set("max_length", std::to_string(s.max_length));
  set("max_line_bytes", std::to_string(s.max_line_bytes));
  set("vocab_sample_pairs", std::to_string(s.vocab_sample_pairs));
  if (s.test_fraction > 0)
    set("test.fraction", cat(s.test_fraction));
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

// The vocabulary, on both languages of the first usable pairs (read until there are
// data.vocab_sample_pairs of them), saved under data.dir.
Vocab train_vocabulary(const PrepareSettings& s, const PreparedPaths& out) {
  std::vector<std::string> sample;
  const auto wanted = static_cast<double>(s.vocab_sample_pairs);
  ProgressLine progress("prepare: vocabulary sample", wanted, "pairs");
  std::int64_t lines = 0;
  const HeldoutSplit split = test_split(s);
  for (std::size_t i = 0; i < s.sources.size(); ++i) {
    PairReader pairs(s.sources[i], static_cast<std::size_t>(s.max_line_bytes));
    text::RawLine a, b;
    bool malformed = false;
    while (static_cast<std::int64_t>(sample.size()) < 2 * s.vocab_sample_pairs &&
           pairs.next(a, b, malformed)) {
      ++lines;
      if (text_reason(a, b, malformed) >= 0 || split.held_out(i, pairs.line_number()))
        continue;
      sample.push_back(std::move(a.text));
      sample.push_back(std::move(b.text));
      progress.update(static_cast<double>(sample.size() / 2));
    }
  }
  if (sample.empty())
    fail(kTool, cat("no usable training pair in ", lines, " lines of ", s.sources.size(),
                    " training items"));
  progress.finish(cat("of ", lines, " lines read"));
  app::say(cat("prepare: vocabulary: training a ", s.model_type, " model of ", s.vocab_size,
               " pieces on ", sample.size() / 2, " pairs (", s.source, " + ", s.target, ")\n"));
  VocabOptions vo;
  vo.vocab_size = s.vocab_size;
  vo.model_type = s.model_type;
  vo.max_sentence_bytes = static_cast<int>(s.max_line_bytes);
  const auto start = std::chrono::steady_clock::now();
  Vocab vocab = Vocab::train(sample, vo);
  sample.clear();
  vocab.save(out.vocab());
  vocab.save_pieces(s.dir + "/vocab.pieces");
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  app::say(
      cat("prepare: vocabulary: ", vocab.size(), " pieces in ", took, " -> ", out.vocab(), "\n"));
  return vocab;
}

// Rank 0 checks the folder's settings, reads the evaluation sets (a malformed one fails before
// the long steps) and trains the vocabulary or reuses the current one; every rank gets it.
Vocab prepare_vocabulary(const PrepareSettings& s, const std::string& config_path, bool force,
                         EvalSet& dev, const Communicator& comm) {
  const PreparedPaths out{s.dir};
  std::string model_bytes;
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    // Before anything in the folder changes: other settings than its own need --force.
    const std::string settings = vocab_settings(s);
    const bool current = check_prepared_settings(s, out, settings, force);
    make_directories(s.dir, "mtk::make_directories");
    const auto limit = static_cast<std::size_t>(s.max_line_bytes);
    dev = read_eval_set(s.dev_tsv, s.dev_source, s.dev_reference, "dev", limit);
    const EvalSet test = read_eval_set(s.test_tsv, s.test_source, s.test_reference, "test", limit);
    if (!s.dev_tsv.empty())
      write_tsv_sides(s.dir, "dev", dev);
    if (!s.test_tsv.empty())
      write_tsv_sides(s.dir, "test", test);
    Vocab vocab;
    if (current) {
      vocab = Vocab::load(out.vocab());
      app::say(cat("prepare: vocabulary ", out.vocab(), " is current (same settings): reused\n"));
    } else {
      fs::remove(s.dir + "/vocab.settings");
      vocab = train_vocabulary(s, out);
      write_file_atomically(s.dir + "/vocab.settings", settings, kTool);
    }
    write_prepare_command(s.dir, prepare_command(s, config_path));
    model_bytes = vocab.serialized();
  });
  model_bytes = comm.broadcast(std::move(model_bytes));
  return agree_on_failure(comm, [&] { return Vocab::from_serialized(model_bytes, out.vocab()); });
}

// The dev pairs, whole (translate reads the .sgm files themselves).
void encode_dev(const PreparedPaths& out, const Vocab& vocab, const EvalSet& dev) {
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
                   const TrainingCounts& n, const EvalSet& dev) {
  const std::int64_t lines = n.lines;
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
                          {"dev_pairs", static_cast<std::int64_t>(dev.src.size())},
                          {"test_pairs_held_out", n.held_out}};
  for (int r = 0; r < kReasons; ++r) {
    total_skipped += n.skipped[r];
    reasons += cat(r ? ", " : "", kReasonNames[r], " ", n.skipped[r]);
    summary.push_back({cat("skipped_", kReasonNames[r]), n.skipped[r]});
  }
  MetricsWriter(out.summary(), true).write(summary);
  app::say(cat("prepare: done -> ", s.dir, "\n  vocabulary: ", vocab.size(), " pieces (",
               s.model_type, ")\n  training: ", n.kept, " pairs of ", lines, " (", n.src_tokens,
               " ", s.source, " + ", n.tgt_tokens, " ", s.target, " tokens incl. EOS); skipped ",
               total_skipped, ": ", reasons, "\n  dev: ", dev.src.size(), " pairs\n",
               n.held_out ? cat("  test: ", n.held_out, " pairs held out of the training data (",
                                "data.test.fraction ", s.test_fraction, ") -> ", s.dir,
                                "/test.source.txt, test.reference.txt\n")
                          : std::string()));
}

void run(const PrepareSettings& s, const std::string& config_path, bool force,
         const Communicator& comm) {
  const PreparedPaths out{s.dir};
  EvalSet dev;
  // 1. Settings, evaluation sets and the vocabulary (rank 0; every rank gets the vocabulary).
  const Vocab vocab = prepare_vocabulary(s, config_path, force, dev, comm);
  // 2. The training pairs, item j on rank j % size, joined by rank 0.
  const TrainingCounts counts = encode_training(s, out, vocab, comm);
  // 3. The dev shards and the summary (rank 0).
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    encode_dev(out, vocab, dev);
    write_summary(s, out, vocab, counts, dev);
  });
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
  std::string out;
  app.add_option("--config", o.config_path, "The YAML config (its data section)")
      ->required()
      ->type_name("FILE");
  app.add_option("--set", o.sets, "Overrides one setting (repeatable), e.g. data.vocab_size=8000")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--out", out, "The prepared folder (default: data.dir; sets data.dir)")
      ->type_name("DIR");
  app.add_flag("--force", force,
               "Train the vocabulary again even where data.dir holds one of the same settings; "
               "needed to prepare a folder again with other settings than its own (its vocabulary "
               "is replaced, and checkpoints trained on the old one are refused)");
  if (const int status = cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  if (!out.empty())  // after the --set words: it wins over a data.dir among them
    o.sets.push_back("data.dir=" + out);
  try {
    const PrepareSettings s = agree_on_failure(world, [&] {
      app::load_config(o);
      return read_prepare_settings(o.config);
    });
    run(s, o.config_path, force, world);
  } catch (const std::exception& e) {
    if (world.rank() == 0)
      std::fprintf(stderr, "%s: error: %s\n", kTool, e.what());
    return 1;
  }
  return 0;
}

}  // namespace mtk::wmt
