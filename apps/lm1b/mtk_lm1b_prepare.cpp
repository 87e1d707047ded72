#include "mtk_lm1b_prepare.hpp"

#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/parallel/communicator.hpp>

#include "cli.hpp"
#include "say.hpp"
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

namespace mtk::lm1b {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* const kDescription =
    "Trains a SentencePiece vocabulary on a sample of CORPUS's training text and encodes the\n"
    "training shards and held-out shard 00000 into token shards under DIR (docs/lm1b.md).\n"
    "CORPUS has the LM1B layout: training-monolingual.tokenized.shuffled/news.en-000NN-of-00100\n"
    "and heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050.";
const char* const kFooter =
    "Run it on any number of MPI ranks: rank 0 trains the vocabulary, then the shards are dealt\n"
    "round-robin over the ranks. A re-run reuses the vocabulary and every finished shard, and\n"
    "encodes damaged ones again; a re-run with other settings than the folder's is refused\n"
    "without --force (DIR/prepare.command records the command with the folder's settings).";

struct Options {
  std::string data, out;
  int vocab_size = 32000;
  std::string model_type = "unigram";
  std::int64_t sample_lines = 1000000;
  std::int64_t max_line_bytes = 4096;
  int training_shards = 0;
  int threads = 1;
  unsigned seed = 1;
  bool strict = false, force = false;
};

// -1 to go on, else the exit status (0 after --help/--version, 2 after a usage error).
int parse(Options& o, const std::vector<std::string>& args, bool print) {
  CLI::App app{kDescription, "mtk-lm1b prepare"};
  cli::configure(app);
  app.footer(kFooter);
  app.add_option("--data", o.data,
                 "The corpus folder (1-billion-word-language-modeling-benchmark-r13output)")
      ->required()
      ->type_name("CORPUS");
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
      ->check(cli::integer_in(1, Lm1bCorpus::kTrainingShards));
  app.add_option("--threads", o.threads,
                 "SentencePiece trainer threads; the vocabulary depends on it (1)")
      ->type_name("N")
      ->check(cli::integer_in(1, 1024));
  app.add_option("--seed", o.seed, "SentencePiece trainer seed (1)")
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

// Runs `fn` (work that may differ between ranks), then agrees on failure: if any rank failed,
// every rank throws the same error, so none is left waiting. Ranks that finish early sleep
// instead of polling MPI, leaving the cores to the ranks still working.
template <class F>
void collective_step(const Communicator& comm, F&& fn) {
  std::string failure;
  try {
    fn();
  } catch (const std::exception& e) {
    failure = e.what();
    if (failure.empty())
      failure = "unknown error";
  }
  comm.idle_barrier();
  comm.agree(failure);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::uint64_t file_size(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  if (ec)
    fail("mtk-lm1b prepare", cat("cannot read the size of '", path, "': ", ec.message()));
  return n;
}

// "0.42 s", "12.3 s", then "3m05s".
std::string seconds_text(double s) {
  if (s >= 60)
    return format_duration(s);
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.2f s" : "%.1f s", s);
  return text;
}

struct Job {
  std::string name, source, output;
  bool heldout = false;
};

// What a rank reports about one shard: the counts of its header, whether it was reused, the
// time, and examples of skipped lines.
struct JobResult {
  bool reused = false;
  double seconds = 0;
  TokenShardInfo info;
  std::vector<std::string> examples;

  std::string serialize() const {
    std::ostringstream os;
    os << (reused ? 1 : 0) << ' ' << seconds << ' ' << info.num_sentences << ' ' << info.num_tokens
       << ' ' << info.num_words << ' ' << info.source_lines << ' ' << info.skipped_empty << ' '
       << info.skipped_invalid_utf8 << ' ' << info.skipped_too_long << '\n';
    for (const auto& e : examples)
      os << e << '\n';
    return os.str();
  }
  static JobResult parse(const std::string& text) {
    JobResult r;
    std::istringstream is(text);
    int reused = 0;
    is >> reused >> r.seconds >> r.info.num_sentences >> r.info.num_tokens >> r.info.num_words >>
        r.info.source_lines >> r.info.skipped_empty >> r.info.skipped_invalid_utf8 >>
        r.info.skipped_too_long;
    r.reused = reused != 0;
    std::string line;
    std::getline(is, line);
    while (std::getline(is, line))
      if (!line.empty())
        r.examples.push_back(line);
    return r;
  }
};

JobResult run_job(const Job& job, const Vocab& vocab, const Options& o) {
  const auto start = Clock::now();
  JobResult result;
  const std::uint64_t source_bytes = file_size(job.source);
  if (!o.force &&
      TokenShard::is_current(job.output, vocab.fingerprint(), source_bytes, o.max_line_bytes)) {
    result.reused = true;
    result.info = TokenShard::read_info(job.output);
    result.seconds = seconds_since(start);
    return result;
  }
  LineReaderOptions ro;
  ro.max_line_bytes = static_cast<std::size_t>(o.max_line_bytes);
  ro.strict = o.strict;
  LineReader reader(job.source, ro);
  TokenShardInfo info;
  info.vocab_size = vocab.size();
  info.eos_id = Vocab::kEosId;
  info.vocab_fingerprint = vocab.fingerprint();
  info.source_bytes = source_bytes;
  info.max_line_bytes = o.max_line_bytes;
  TokenShardWriter writer(job.output, info);
  std::string line;
  std::vector<std::int32_t> ids;
  while (reader.next(line)) {
    ids.clear();
    vocab.encode_append(line, ids);
    writer.add_sentence(ids, count_words(line.data(), line.size()));
  }
  writer.set_source_stats(reader.stats());
  result.info = writer.finish();
  result.examples = reader.stats().examples;
  result.seconds = seconds_since(start);
  return result;
}

std::string vocab_settings(const Options& o, const Lm1bCorpus& corpus) {
  std::uint64_t bytes = 0;
  for (const auto& s : corpus.training_shards)
    bytes += file_size(s);
  return cat("mtk-lm1b vocabulary settings v1: vocab_size=", o.vocab_size,
             " model_type=", o.model_type, " sample_lines=", o.sample_lines,
             " max_line_bytes=", o.max_line_bytes,
             " training_shards=", corpus.training_shards.size(), " training_bytes=", bytes,
             " threads=", o.threads, " seed=", o.seed, " byte_fallback=1\n");
}

// The command that prepares `o.out` with these settings again, every setting spelled out (what
// the advice after a damaged shard names: the same settings keep the vocabulary).
std::string prepare_command(const std::string& data, const std::string& out,
                            const std::vector<std::pair<std::string, std::string>>& words) {
  const auto abs = [](const std::string& p) { return fs::absolute(p).lexically_normal().string(); };
  std::string cmd =
      cat("mtk-lm1b prepare --data ", shell_quote(abs(data)), " --out ", shell_quote(abs(out)));
  for (const auto& [key, value] : words)
    if (key != "training_bytes" && key != "byte_fallback") {
      std::string option = key;
      std::replace(option.begin(), option.end(), '_', '-');
      cmd += cat(" --", option, " ", shell_quote(value));
    }
  return cmd;
}

// Refuses (without --force) settings other than those that prepared `o.out` when it holds a
// vocabulary: a new one would replace vocab.model, and every checkpoint trained on the old one
// would then be refused. The error names each differing setting, there and now, and the command
// that keeps the folder's own settings.
void check_prepared_settings(const Options& o, const std::string& settings) {
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
    if (was == value)
      continue;
    std::string name = "--" + key;
    std::replace(name.begin(), name.end(), '_', '-');
    if (key == "training_bytes")
      name = "the corpus's training text (bytes)";
    else if (key == "byte_fallback")
      name = "byte_fallback";
    diffs += cat(diffs.empty() ? "" : "; ", name, " ", was, " there, ", value, " now");
  }
  std::string keep = recorded_prepare_command(o.out);
  if (keep.empty() && !before.empty())
    keep = prepare_command(o.data, o.out, before);
  fail("mtk-lm1b prepare",
       cat("'", o.out, "' was prepared with other settings: ",
           old.empty() ? cat("its vocabulary's settings are not recorded (no ", settings_path, ")")
                       : diffs,
           ". Preparing it with these would train a new vocabulary over ", vocab_path,
           ", and every checkpoint trained on the old one would be refused",
           keep.empty() ? std::string(".") : cat(". To keep it, run `", keep, "`"),
           "; to replace it, give --force (or prepare into another --out)"));
}

struct Totals {
  LineStats lines;  // counts only
  std::int64_t sentences = 0, tokens = 0, words = 0, shards = 0, reused = 0;
  void add(const JobResult& r) {
    sentences += r.info.num_sentences;
    tokens += r.info.num_tokens;
    words += r.info.num_words;
    lines.lines += r.info.source_lines;
    lines.empty += r.info.skipped_empty;
    lines.invalid_utf8 += r.info.skipped_invalid_utf8;
    lines.too_long += r.info.skipped_too_long;
    ++shards;
    reused += r.reused ? 1 : 0;
  }
};

// The vocabulary of the run: what it is, and how it came about.
struct VocabStep {
  Vocab vocab;
  LineStats sample_stats;
  std::int64_t sample_size = 0;
  bool trained = false;
};

// Rank 0 trains the vocabulary on a sample (or reuses the one there with the same settings);
// every rank gets its bytes.
VocabStep prepare_vocabulary(const Options& o, const Lm1bCorpus& corpus, const Communicator& comm) {
  VocabStep v;
  const std::string vocab_path = Lm1bPrepared::vocab_path(o.out);
  const std::string settings_path = (fs::path(o.out) / "vocab.settings").string();
  std::string model_bytes;
  LineStats& sample_stats = v.sample_stats;
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    const std::string settings = vocab_settings(o, corpus);
    if (!o.force && fs::exists(vocab_path) && fs::is_regular_file(settings_path) &&
        read_whole_file(settings_path, "mtk-lm1b prepare") == settings) {
      model_bytes = Vocab::load(vocab_path).serialized();
      write_prepare_command(o.out, prepare_command(o.data, o.out, settings_words(settings)));
      app::say(cat("prepare: vocabulary ", vocab_path, " is current (same settings): reused\n"));
      return;
    }
    const auto t0 = Clock::now();
    LineReaderOptions ro;
    ro.max_line_bytes = static_cast<std::size_t>(o.max_line_bytes);
    ro.strict = o.strict;
    app::say(cat("prepare: vocabulary: reading up to ", o.sample_lines, " lines from ",
                 corpus.training_shards.size(), " training shards\n"));
    const auto lines = sample_lines(corpus.training_shards, o.sample_lines, ro, sample_stats);
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
    write_prepare_command(o.out, prepare_command(o.data, o.out, settings_words(settings)));
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

// The corpus and the output folders (rank 0 makes them; every rank must see them).
Lm1bCorpus open_corpus(const Options& o, const Communicator& comm) {
  const int rank = comm.rank(), size = comm.size();
  const bool root = rank == 0;
  Lm1bCorpus corpus;
  collective_step(comm, [&] {
    corpus = Lm1bCorpus::find(o.data, o.training_shards);
    if (root) {
      // Before anything in the folder changes: other settings than its own need --force.
      check_prepared_settings(o, vocab_settings(o, corpus));
      make_directories((fs::path(o.out) / "train").string(), "mtk::make_directories");
      make_directories((fs::path(o.out) / "heldout").string(), "mtk::make_directories");
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
  if (root)
    app::say(cat("prepare: corpus ", o.data, ": ", corpus.training_shards.size(),
                 " training shards + held-out shard 00000; ", size, size == 1 ? " rank" : " ranks",
                 "\n"));
  return corpus;
}

// The shards to encode: held-out first, then training.
std::vector<Job> shard_jobs(const Options& o, const Lm1bCorpus& corpus) {
  std::vector<Job> jobs;
  jobs.push_back({lm1b_heldout_shard_name(0), corpus.heldout_shard,
                  Lm1bPrepared::heldout_shard_path(o.out, 0), true});
  for (std::size_t i = 0; i < corpus.training_shards.size(); ++i) {
    const int n = corpus.training_numbers[i];
    jobs.push_back({lm1b_training_shard_name(n), corpus.training_shards[i],
                    Lm1bPrepared::training_shard_path(o.out, n), false});
  }
  return jobs;
}

// Encodes `jobs`, job j on rank j % size, in rounds; rank 0 reports each shard and adds it to
// `training` or `heldout`.
void encode_shards(const Options& o, const Communicator& comm, const std::vector<Job>& jobs,
                   const Vocab& vocab, Totals& training, Totals& heldout) {
  const int rank = comm.rank(), size = comm.size();
  const bool root = rank == 0;
  const int num_jobs = static_cast<int>(jobs.size());
  const int width = static_cast<int>(std::to_string(num_jobs).size());
  for (int first = 0; first < num_jobs; first += size) {
    const int j = first + rank;
    std::string mine;
    collective_step(comm, [&] {
      if (j < num_jobs)
        mine = run_job(jobs[static_cast<std::size_t>(j)], vocab, o).serialize();
    });
    const auto results = comm.gather(mine);
    if (!root)
      continue;
    for (int r = 0; r < size && first + r < num_jobs; ++r) {
      const Job& job = jobs[static_cast<std::size_t>(first + r)];
      const JobResult res = JobResult::parse(results[static_cast<std::size_t>(r)]);
      (job.heldout ? heldout : training).add(res);
      char counter[32];
      std::snprintf(counter, sizeof counter, "[%*d/%d]", width, first + r + 1, num_jobs);
      const std::int64_t skipped =
          res.info.skipped_empty + res.info.skipped_invalid_utf8 + res.info.skipped_too_long;
      app::say(cat("prepare: ", counter, " ", job.name, ": ", res.info.num_sentences,
                   " sentences, ", res.info.num_words, " words, ", res.info.num_tokens, " tokens, ",
                   skipped, " skipped lines",
                   res.reused ? ", reused" : cat(", ", seconds_text(res.seconds)),
                   size > 1 ? cat(" (rank ", r, ")") : std::string(), "\n"));
      for (const auto& e : res.examples)
        app::say(cat("  skipped ", e, "\n"));
    }
  }
}

// Rank 0 writes summary.json and the manifest, which marks the run finished.
void write_manifest(const Options& o, const Communicator& comm, const std::vector<Job>& jobs,
                    const VocabStep& v, const Totals& training, const Totals& heldout,
                    double tokens_per_word, Clock::time_point start) {
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    Lm1bPrepared prepared;
    prepared.dir = o.out;
    prepared.vocab_model = Lm1bPrepared::vocab_path(o.out);
    for (const auto& job : jobs)
      if (!job.heldout)
        prepared.training_shards.push_back(job.output);
    prepared.heldout_shard = jobs.front().output;
    MetricRecord summary = {
        {"vocab_size", std::int64_t{v.vocab.size()}},
        {"model_type", o.model_type},
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
  // 1. The corpus and the output folders.
  const Lm1bCorpus corpus = open_corpus(o, comm);
  // 2. The vocabulary: rank 0 trains (or reuses) it, every rank gets its bytes.
  const VocabStep v = prepare_vocabulary(o, corpus, comm);
  // 3. The shards: held-out first, then training; job j on rank j % size, in rounds.
  const std::vector<Job> jobs = shard_jobs(o, corpus);
  Totals training, heldout;
  encode_shards(o, comm, jobs, v.vocab, training, heldout);
  // 4. Manifest and summary (rank 0), then the report.
  const double tokens_per_word =
      static_cast<double>(heldout.tokens) / static_cast<double>(heldout.words + heldout.sentences);
  write_manifest(o, comm, jobs, v, training, heldout, tokens_per_word, start);
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
