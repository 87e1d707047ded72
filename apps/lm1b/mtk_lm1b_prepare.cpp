// SPDX-License-Identifier: Apache-2.0
#include "mtk_lm1b_prepare.hpp"

#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/progress_line.hpp>
#include <mtk/data/rank_jobs.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/parallel/communicator.hpp>

#include "cli.hpp"
#include "mtk_lm1b_prepare_jobs.hpp"
#include "say.hpp"
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>

namespace mtk::lm1b {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* const kDescription =
    "Trains a SentencePiece vocabulary on a sample of the training text and encodes the training\n"
    "and held-out text into token shards under DIR (docs/lm1b.md). The text is an LM1B-layout\n"
    "corpus (--data: training-monolingual.tokenized.shuffled/news.en-000NN-of-00100 and\n"
    "heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050), or files of your own\n"
    "(--text: one sentence or document a line, plain or .gz, or JSON Lines with --format jsonl),\n"
    "with held-out lines by fraction (--heldout-fraction) or held-out files (--heldout).";
const char* const kFooter =
    "Run it on any number of MPI ranks: rank 0 trains the vocabulary, then the files are dealt\n"
    "round-robin over the ranks. A re-run reuses the vocabulary and every finished shard, and\n"
    "encodes damaged ones again; a re-run with other settings than the folder's is refused\n"
    "without --force (DIR/prepare.command records the command with the folder's settings).";

// -1 to go on, else the exit status (0 after --help/--version, 2 after a usage error).
int parse(Options& o, const std::vector<std::string>& args, bool print) {
  CLI::App app{kDescription, "mtk-lm1b prepare"};
  cli::configure(app);
  app.footer(kFooter);
  auto* input = app.add_option_group("input", "The corpus: exactly one of");
  auto* data = input
                   ->add_option("--data", o.data,
                                "An LM1B-layout corpus folder "
                                "(1-billion-word-language-modeling-benchmark-r13output)")
                   ->type_name("CORPUS");
  auto* text =
      input
          ->add_option("--text", o.text,
                       "Text files or glob patterns (quoted), plain or .gz, one sentence or "
                       "document a line (JSON Lines with --format jsonl)")
          ->type_name("FILE...")
          ->expected(1, -1);
  input->require_option(1);
  app.add_option("--format", o.format, "--text: text | jsonl (text)")
      ->type_name("F")
      ->check(CLI::IsMember({"text", "jsonl"}))
      ->needs(text);
  app.add_option("--text-field", o.text_field, "--format jsonl: the field holding the text (text)")
      ->type_name("NAME")
      ->needs(text);
  auto* heldout = app.add_option("--heldout", o.heldout,
                                 "--text: held-out files or glob patterns (evaluation text)")
                      ->type_name("FILE...")
                      ->expected(1, -1)
                      ->needs(text);
  app.add_option("--heldout-fraction", o.heldout_fraction,
                 "--text without --heldout: the share of lines held out, chosen by a hash of "
                 "file and line keyed with --seed (0.01)")
      ->type_name("F")
      ->check(CLI::Range(1e-6, 0.5))
      ->needs(text)
      ->excludes(heldout);
  app.add_option("--out", o.out, "Output folder (created; shared by all ranks)")
      ->required()
      ->type_name("DIR");
  app.add_option("--vocab-size", o.vocab_size,
                 "Vocabulary size, reserved ids and byte pieces included (32000)")
      ->type_name("N")
      ->check(cli::integer_in(8, 1 << 24));
  app.add_option("--model-type", o.model_type, "unigram | bpe | word | char (unigram)")
      ->type_name("T")
      ->check(CLI::IsMember({"unigram", "bpe", "word", "char"}));
  app.add_option("--sample-lines", o.sample_lines,
                 "Training lines the vocabulary is trained on, at most (1000000)")
      ->type_name("N")
      ->check(cli::integer_in(1, std::int64_t{1} << 40));
  app.add_option("--max-line-bytes", o.max_line_bytes,
                 "Longer lines are skipped and counted (4096)")
      ->type_name("N")
      ->check(cli::integer_in(1, std::int64_t{1} << 30));
  app.add_option("--training-shards", o.training_shards,
                 "Require and use training shards 00001..N (default: all present, which must be "
                 "00001..000NN without a gap)")
      ->type_name("N")
      ->check(cli::integer_in(1, Lm1bCorpus::kTrainingShards))
      ->needs(data);
  app.add_option("--threads", o.threads,
                 "SentencePiece trainer threads; the vocabulary depends on it (1)")
      ->type_name("N")
      ->check(cli::integer_in(1, 1024));
  app.add_option("--seed", o.seed, "SentencePiece trainer seed, and the held-out split's (1)")
      ->type_name("N")
      ->check(cli::integer_in(0, 0xFFFFFFFEll));
  app.add_flag("--strict", o.strict, "A line that would be skipped is an error instead");
  app.add_flag(
      "--force", o.force,
      "Retrain the vocabulary and re-encode every shard; needed to prepare a folder "
      "again with other settings than its own (its vocabulary is replaced, and checkpoints "
      "trained on the old one are refused)");
  return cli::parse(app, args, print);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What the vocabulary depends on, as one line (DIR/vocab.settings). An LM1B corpus keeps the line
// of earlier versions, so that folders prepared by them stay current.
std::string vocab_settings(const Options& o, const PrepareInput& in) {
  const std::string common =
      cat("vocab_size=", o.vocab_size, " model_type=", o.model_type,
          " sample_lines=", o.sample_lines, " max_line_bytes=", o.max_line_bytes);
  const std::string tail = cat(" threads=", o.threads, " seed=", o.seed, " byte_fallback=1\n");
  if (in.lm1b)
    return cat("mtk-lm1b vocabulary settings v1: ", common,
               " training_shards=", in.training_files.size(),
               " training_bytes=", in.training_bytes(), tail);
  return cat("mtk-lm1b vocabulary settings v1: ", common, " format=", o.format,
             " text_field=", o.format == "jsonl" ? o.text_field : "-",
             " training_files=", in.training_files.size(), " training_bytes=", in.training_bytes(),
             " heldout_files=", in.heldout_files.size(),
             " heldout_fraction=", in.heldout_files.empty() ? cat(o.heldout_fraction) : "-", tail);
}

// Settings words that are not options of the command line as they are (prepare_command writes
// --text's own from the options).
bool derived_setting(const std::string& key) {
  return key == "training_bytes" || key == "byte_fallback" || key == "training_files" ||
         key == "heldout_files" || key == "text_field" || key == "heldout_fraction";
}

// The command that prepares `o.out` with these settings again, every setting spelled out (what
// the advice after a damaged shard names: the same settings keep the vocabulary); --text's files
// as they were found.
std::string prepare_command(const Options& o, const PrepareInput& in,
                            const std::vector<std::pair<std::string, std::string>>& words) {
  const auto abs = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
  std::string cmd = "mtk-lm1b prepare";
  if (in.lm1b) {
    cmd += " --data " + shell_quote(abs(o.data));
  } else {
    cmd += " --text";
    for (const auto& f : in.training_files)
      cmd += " " + shell_quote(abs(f));
    if (!in.heldout_files.empty()) {
      cmd += " --heldout";
      for (const auto& f : in.heldout_files)
        cmd += " " + shell_quote(abs(f));
    } else {
      cmd += cat(" --heldout-fraction ", o.heldout_fraction);
    }
    if (o.format == "jsonl")
      cmd += " --text-field " + shell_quote(o.text_field);
  }
  cmd += " --out " + shell_quote(abs(o.out));
  for (const auto& [key, value] : words)
    if (!derived_setting(key)) {
      std::string option = key;
      std::replace(option.begin(), option.end(), '_', '-');
      cmd += cat(" --", option, " ", shell_quote(value));
    }
  return cmd;
}

// The name of a setting in the error about differing settings.
std::string setting_name(const std::string& key) {
  if (key == "training_bytes")
    return "the corpus's training text (bytes)";
  if (key == "training_files" || key == "heldout_files")
    return key == "training_files" ? "the training files" : "the held-out files";
  if (key == "byte_fallback")
    return key;
  std::string name = "--" + key;
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// Refuses (without --force) settings other than those that prepared `o.out` when it holds a
// vocabulary: a new one would replace vocab.model, and every checkpoint trained on the old one
// would then be refused. The error names each differing setting, there and now, and the command
// that keeps the folder's own settings.
void check_prepared_settings(const Options& o, const PrepareInput& in,
                             const std::string& settings) {
  const std::string vocab_path = Lm1bPrepared::vocab_path(o.out);
  const std::string settings_path = (fs::path(o.out) / "vocab.settings").string();
  if (o.force || !fs::exists(vocab_path))
    return;
  const std::string old =
      fs::is_regular_file(settings_path) ? read_whole_file(settings_path, "mtk-lm1b prepare") : "";
  if (old == settings)
    return;
  const auto before = settings_words(old), now = settings_words(settings);
  const auto value_of = [](const std::vector<std::pair<std::string, std::string>>& words,
                           const std::string& key) -> std::string {
    for (const auto& [k, v] : words)
      if (k == key)
        return v;
    return "(not recorded)";
  };
  std::string diffs;
  for (const auto& [key, value] : now) {
    const std::string was = value_of(before, key);
    if (was != value)
      diffs +=
          cat(diffs.empty() ? "" : "; ", setting_name(key), " ", was, " there, ", value, " now");
  }
  std::string keep = recorded_prepare_command(o.out);
  if (keep.empty() && !before.empty() && in.lm1b)
    keep = prepare_command(o, in, before);
  fail("mtk-lm1b prepare",
       cat("'", o.out, "' was prepared with other settings: ",
           old.empty() ? cat("its vocabulary's settings are not recorded (no ", settings_path, ")")
                       : diffs,
           ". Preparing it with these would train a new vocabulary over ", vocab_path,
           ", and every checkpoint trained on the old one would be refused",
           keep.empty() ? std::string(".") : cat(". To keep it, run `", keep, "`"),
           "; to replace it, give --force (or prepare into another --out)"));
}

// The vocabulary of the run: what it is, and how it came about.
struct VocabStep {
  Vocab vocab;
  LineStats sample_stats;
  std::int64_t sample_size = 0;
  bool trained = false;
};

// Rank 0 trains the vocabulary on a sample (or reuses the one there with the same settings);
// every rank gets its bytes.
VocabStep prepare_vocabulary(const Options& o, const PrepareInput& in, const Communicator& comm) {
  VocabStep v;
  const std::string vocab_path = Lm1bPrepared::vocab_path(o.out);
  const std::string settings_path = (fs::path(o.out) / "vocab.settings").string();
  std::string model_bytes;
  LineStats& sample_stats = v.sample_stats;
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    const std::string settings = vocab_settings(o, in);
    if (!o.force && fs::exists(vocab_path) && fs::is_regular_file(settings_path) &&
        read_whole_file(settings_path, "mtk-lm1b prepare") == settings) {
      model_bytes = Vocab::load(vocab_path).serialized();
      write_prepare_command(o.out, prepare_command(o, in, settings_words(settings)));
      app::say(cat("prepare: vocabulary ", vocab_path, " is current (same settings): reused\n"));
      return;
    }
    const auto t0 = Clock::now();
    app::say(cat("prepare: vocabulary: reading up to ", o.sample_lines, " lines from ",
                 in.training_files.size(), in.lm1b ? " training shards\n" : " training files\n"));
    // The training side of a held-out split only.
    const auto trained_on = [&](std::size_t file, std::int64_t line) {
      return !in.split.held_out(file, line);
    };
    const auto lines = sample_lines(
        in.training_files, o.sample_lines, in.reader_options(o), sample_stats,
        in.split.fraction > 0 ? trained_on : std::function<bool(std::size_t, std::int64_t)>());
    v.sample_size = static_cast<std::int64_t>(lines.size());
    app::say(cat("prepare: vocabulary: training a ", o.model_type, " model of ", o.vocab_size,
                 " pieces on ", lines.size(), " lines (", o.threads,
                 o.threads == 1 ? " thread" : " threads", "); ", sample_stats.skipped_summary(),
                 sample_stats.skipped() ? ", each reported with its shard below" : "", "\n"));
    VocabOptions vo;
    vo.vocab_size = o.vocab_size;
    vo.model_type = o.model_type;
    vo.max_sentence_bytes = static_cast<int>(o.max_line_bytes);
    vo.num_threads = o.threads;
    vo.seed = o.seed;
    const Vocab vocab = Vocab::train(lines, vo);
    fs::remove(settings_path);
    vocab.save(vocab_path);
    vocab.save_pieces((fs::path(o.out) / "vocab.pieces").string());
    write_file_atomically(settings_path, settings, "mtk-lm1b prepare");
    write_prepare_command(o.out, prepare_command(o, in, settings_words(settings)));
    model_bytes = vocab.serialized();
    v.trained = true;
    app::say(cat("prepare: vocabulary: ", vocab.size(), " pieces in ",
                 seconds_text(seconds_since(t0)), " -> ", vocab_path, "\n"));
  });
  model_bytes = comm.broadcast(std::move(model_bytes));
  collective_step(comm, [&] { v.vocab = Vocab::from_serialized(model_bytes, vocab_path); });
  return v;
}

// Rank 0's summary of the run on stdout.
void report(const Options& o, const VocabStep& v, const Totals& training, const Totals& heldout,
            double tokens_per_word, double seconds) {
  const Vocab& vocab = v.vocab;
  const bool trained = v.trained;
  const std::int64_t sample_size = v.sample_size;
  const LineStats& sample_stats = v.sample_stats;
  app::say(cat("prepare: done in ", seconds_text(seconds), " -> ", o.out, "\n"));
  app::say(cat("  vocabulary: ", vocab.size(), " pieces (", o.model_type, "), ",
               trained ? cat("trained on ", sample_size, " lines, ", sample_stats.skipped_summary())
                       : std::string("reused"),
               "\n"));
  app::say(cat("  training:   ", training.shards, " shards (", training.reused, " reused), ",
               training.sentences, " sentences, ", training.words, " words, ", training.tokens,
               " tokens incl. end-of-sentence; ", training.lines.skipped_summary(), " of ",
               training.lines.lines, " lines\n"));
  char ratio[64];
  std::snprintf(ratio, sizeof ratio, "%.4f", tokens_per_word);
  app::say(cat("  held-out:   ", heldout.sentences, " sentences, ", heldout.words, " words + ",
               heldout.sentences, " end-of-sentence = ", heldout.words + heldout.sentences, ", ",
               heldout.tokens, " tokens: ", ratio, " tokens per word (end-of-sentence counted); ",
               heldout.lines.skipped_summary(), "\n"));
}

// The input and the output folders (rank 0 makes them; every rank must see them).
PrepareInput open_input(const Options& o, const Communicator& comm) {
  const int rank = comm.rank(), size = comm.size();
  const bool root = rank == 0;
  PrepareInput in;
  collective_step(comm, [&] {
    in = find_input(o);
    if (root) {
      // Before anything in the folder changes: other settings than its own need --force.
      check_prepared_settings(o, in, vocab_settings(o, in));
      make_directories((fs::path(o.out) / "train").string(), "mtk::make_directories");
      make_directories((fs::path(o.out) / "heldout" / (in.lm1b ? "" : "parts")).string(),
                       "mtk::make_directories");
      // The manifest marks a finished run: it goes until this one finishes.
      fs::remove(fs::path(o.out) / "manifest.txt");
    }
  });
  collective_step(comm, [&] {
    if (!fs::is_directory(fs::path(o.out) / "train"))
      fail("mtk-lm1b prepare",
           cat("'", o.out, "' is not visible on rank ", rank,
               ": with several ranks, --out must be on a file system all ranks share"));
  });
  const std::string ranks = cat(size, size == 1 ? " rank" : " ranks");
  if (!root)
    return in;
  if (in.lm1b)
    app::say(cat("prepare: corpus ", o.data, ": ", in.training_files.size(),
                 " training shards + held-out shard 00000; ", ranks, "\n"));
  else
    app::say(cat("prepare: ", in.training_files.size(), " training files (", o.format,
                 o.format == "jsonl" ? cat(", field \"", o.text_field, "\"") : "", ", ",
                 format_bytes(static_cast<double>(in.training_bytes())), "), held out: ",
                 in.heldout_files.empty() ? cat(o.heldout_fraction, " of the lines")
                                          : cat(in.heldout_files.size(), " files"),
                 "; ", ranks, "\n"));
  return in;
}

// Rank 0 writes summary.json and the manifest, which marks the run finished.
void write_manifest(const Options& o, const Communicator& comm, const PrepareInput& in,
                    const std::vector<Job>& jobs, const VocabStep& v, const Totals& training,
                    const Totals& heldout, double tokens_per_word, Clock::time_point start) {
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    Lm1bPrepared prepared;
    prepared.dir = o.out;
    prepared.vocab_model = Lm1bPrepared::vocab_path(o.out);
    for (const auto& job : jobs)
      if (!job.heldout)
        prepared.training_shards.push_back(job.output);
    prepared.heldout_shard = heldout_path(o, in);
    MetricRecord summary = {
        {"vocab_size", std::int64_t{v.vocab.size()}},
        {"model_type", o.model_type},
        {"input", in.lm1b ? std::string("lm1b") : o.format},
        {"vocab_trained", std::int64_t{v.trained ? 1 : 0}},
        {"vocab_sample_lines", v.sample_size},
        {"vocab_sample_skipped", v.sample_stats.skipped()},
        {"training_shards", training.shards},
        {"training_sentences", training.sentences},
        {"training_words", training.words},
        {"training_tokens", training.tokens},
        {"training_lines", training.lines.lines},
        {"training_skipped_empty", training.lines.empty},
        {"training_skipped_invalid_utf8", training.lines.invalid_utf8},
        {"training_skipped_too_long", training.lines.too_long},
        {"heldout_sentences", heldout.sentences},
        {"heldout_words", heldout.words},
        {"heldout_tokens", heldout.tokens},
        {"heldout_skipped", heldout.lines.skipped()},
        {"heldout_tokens_per_word", tokens_per_word},
        {"max_line_bytes", o.max_line_bytes},
        {"ranks", std::int64_t{comm.size()}},
        {"seconds", seconds_since(start)},
    };
    MetricsWriter((fs::path(o.out) / "summary.json").string(), true).write(summary);
    prepared.write_manifest();
  });
}

void run(const Options& o, const Communicator& comm) {
  const auto start = Clock::now();
  // 1. The input and the output folders.
  const PrepareInput in = open_input(o, comm);
  // 2. The vocabulary: rank 0 trains (or reuses) it, every rank gets its bytes.
  const VocabStep v = prepare_vocabulary(o, in, comm);
  // 3. The shards: one job per input file, job j on rank j % size, in rounds; --text's held-out
  //    pieces joined into one shard.
  const std::vector<Job> jobs = make_jobs(o, in);
  Totals training, heldout;
  encode_jobs(o, comm, in, jobs, v.vocab, training, heldout);
  // 4. Manifest and summary (rank 0), then the report.
  const double tokens_per_word =
      static_cast<double>(heldout.tokens) / static_cast<double>(heldout.words + heldout.sentences);
  write_manifest(o, comm, in, jobs, v, training, heldout, tokens_per_word, start);
  if (comm.rank() == 0)
    report(o, v, training, heldout, tokens_per_word, seconds_since(start));
}

}  // namespace

int prepare_main(const std::vector<std::string>& args) {
  const Communicator world = Communicator::world();
  const int rank = world.rank();
  Options options;
  // The same on every rank: no agreement needed.
  if (const int status = parse(options, args, rank == 0); status >= 0)
    return status;
  try {
    run(options, world);
  } catch (const std::exception& e) {
    // Every rank got the same error from the agreement; rank 0 reports it.
    if (rank == 0)
      std::fprintf(stderr, "mtk-lm1b prepare: error: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace mtk::lm1b
