// SPDX-License-Identifier: Apache-2.0
#include "mtk_lm1b_prepare_jobs.hpp"

#include <mtk/base/error.hpp>
#include <mtk/data/progress_line.hpp>
#include <mtk/data/rank_jobs.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/parallel/communicator.hpp>

#include "say.hpp"
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace mtk::lm1b {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

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

// What a rank reports about one job: the headers of its shards, whether they were reused, the
// time, and examples of skipped lines.
struct JobResult {
  bool reused = false;
  double seconds = 0;
  TokenShardInfo info, heldout;  // heldout: the split's held-out piece (fraction), else empty
  std::vector<std::string> examples;

  std::string serialize() const {
    std::ostringstream os;
    os << (reused ? 1 : 0) << ' ' << seconds;
    for (const TokenShardInfo* i : {&info, &heldout})
      os << ' ' << i->num_sentences << ' ' << i->num_tokens << ' ' << i->num_words << ' '
         << i->source_lines << ' ' << i->skipped_empty << ' ' << i->skipped_invalid_utf8 << ' '
         << i->skipped_too_long;
    os << '\n';
    for (const auto& e : examples)
      os << e << '\n';
    return os.str();
  }
  static JobResult parse(const std::string& text) {
    JobResult r;
    std::istringstream is(text);
    int reused = 0;
    is >> reused >> r.seconds;
    for (TokenShardInfo* i : {&r.info, &r.heldout})
      is >> i->num_sentences >> i->num_tokens >> i->num_words >> i->source_lines >>
          i->skipped_empty >> i->skipped_invalid_utf8 >> i->skipped_too_long;
    r.reused = reused != 0;
    std::string line;
    std::getline(is, line);
    while (std::getline(is, line))
      if (!line.empty())
        r.examples.push_back(line);
    return r;
  }
};

TokenShardInfo shard_info(const Vocab& vocab, std::uint64_t source_bytes, std::int64_t limit) {
  TokenShardInfo info;
  info.vocab_size = vocab.size();
  info.eos_id = Vocab::kEosId;
  info.vocab_fingerprint = vocab.fingerprint();
  info.source_bytes = source_bytes;
  info.max_line_bytes = limit;
  return info;
}

JobResult run_job(const Job& job, const Vocab& vocab, const Options& o, const PrepareInput& in) {
  const auto start = Clock::now();
  JobResult result;
  const std::uint64_t source_bytes = file_size(job.source);
  const auto current = [&](const std::string& path) {
    return TokenShard::is_current(path, vocab.fingerprint(), source_bytes, o.max_line_bytes);
  };
  if (!o.force && current(job.output) &&
      (job.heldout_output.empty() || current(job.heldout_output))) {
    result.reused = true;
    result.info = TokenShard::read_info(job.output);
    if (!job.heldout_output.empty())
      result.heldout = TokenShard::read_info(job.heldout_output);
    result.seconds = seconds_since(start);
    return result;
  }
  LineReader reader(job.source, in.reader_options(o));
  const TokenShardInfo info = shard_info(vocab, source_bytes, o.max_line_bytes);
  TokenShardWriter writer(job.output, info);
  std::unique_ptr<TokenShardWriter> held;
  if (!job.heldout_output.empty())
    held = std::make_unique<TokenShardWriter>(job.heldout_output, info);
  // Rank 0 shows its own job's progress (the other ranks' jobs are reported when they end).
  ProgressLine progress(cat("prepare: ", job.name), static_cast<double>(source_bytes), "bytes",
                        {app::says()});
  std::string line;
  std::vector<std::int32_t> ids;
  std::int64_t n = 0;
  while (reader.next(line)) {
    ids.clear();
    vocab.encode_append(line, ids);
    const bool out = held && in.split.held_out(job.file_index, reader.line_number());
    (out ? *held : writer).add_sentence(ids, count_words(line.data(), line.size()));
    if (++n % 1024 == 0)
      progress.update(static_cast<double>(reader.file_offset()));
  }
  writer.set_source_stats(reader.stats());
  result.info = writer.finish();
  if (held)
    result.heldout = held->finish();
  result.examples = reader.stats().examples;
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace

std::string seconds_text(double s) {
  if (s >= 60)
    return format_duration(s);
  char text[32];
  std::snprintf(text, sizeof text, s < 10 ? "%.2f s" : "%.1f s", s);
  return text;
}

std::uint64_t PrepareInput::training_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& f : training_files)
    bytes += file_size(f);
  return bytes;
}

LineReaderOptions PrepareInput::reader_options(const Options& o) const {
  LineReaderOptions ro;
  ro.max_line_bytes = static_cast<std::size_t>(o.max_line_bytes);
  ro.strict = o.strict;
  if (!lm1b && o.format == "jsonl")
    ro.json_text_field = o.text_field;
  return ro;
}

PrepareInput find_input(const Options& o) {
  PrepareInput in;
  if (!o.data.empty()) {
    in.corpus = Lm1bCorpus::find(o.data, o.training_shards);
    in.training_files = in.corpus.training_shards;
    return in;
  }
  in.lm1b = false;
  in.training_files = expand_file_patterns(o.text, "--text");
  if (!o.heldout.empty()) {
    in.heldout_files = expand_file_patterns(o.heldout, "--heldout");
    for (const auto& h : in.heldout_files)
      for (const auto& t : in.training_files)
        if (fs::equivalent(h, t))
          fail("mtk-lm1b prepare",
               cat("'", h,
                   "' is given by both --text and --heldout: held-out text must not be "
                   "trained on"));
  } else {
    in.split.fraction = o.heldout_fraction;
    in.split.seed = o.seed;
  }
  return in;
}

std::string heldout_path(const Options& o, const PrepareInput& in) {
  return in.lm1b ? Lm1bPrepared::heldout_shard_path(o.out, 0)
                 : (fs::path(o.out) / "heldout" / "heldout.tok").string();
}

std::vector<Job> make_jobs(const Options& o, const PrepareInput& in) {
  std::vector<Job> jobs;
  if (in.lm1b) {
    const Lm1bCorpus& c = in.corpus;
    jobs.push_back({lm1b_heldout_shard_name(0), c.heldout_shard,
                    Lm1bPrepared::heldout_shard_path(o.out, 0), true, "", 0});
    for (std::size_t i = 0; i < c.training_shards.size(); ++i) {
      const int n = c.training_numbers[i];
      jobs.push_back({lm1b_training_shard_name(n), c.training_shards[i],
                      Lm1bPrepared::training_shard_path(o.out, n), false, "", i});
    }
    return jobs;
  }
  const fs::path train = fs::path(o.out) / "train", parts = fs::path(o.out) / "heldout" / "parts";
  for (std::size_t i = 0; i < in.training_files.size(); ++i) {
    const std::string name = piece_name(static_cast<int>(i) + 1, in.training_files[i]);
    jobs.push_back({name, in.training_files[i], (train / (name + ".tok")).string(), false,
                    in.split.fraction > 0 ? (parts / (name + ".tok")).string() : "", i});
  }
  for (std::size_t i = 0; i < in.heldout_files.size(); ++i) {
    const std::string name = "heldout-" + piece_name(static_cast<int>(i) + 1, in.heldout_files[i]);
    jobs.push_back({name, in.heldout_files[i], (parts / (name + ".tok")).string(), true, "", i});
  }
  return jobs;
}

void Totals::add(const TokenShardInfo& info, bool reused_shard) {
  sentences += info.num_sentences;
  tokens += info.num_tokens;
  words += info.num_words;
  lines.lines += info.source_lines;
  lines.empty += info.skipped_empty;
  lines.invalid_utf8 += info.skipped_invalid_utf8;
  lines.too_long += info.skipped_too_long;
  ++shards;
  reused += reused_shard ? 1 : 0;
}

namespace {

// Rank 0's line about a finished job, with the share of all input bytes done, the rate since
// the encoding began and the time left.
void report_job(const Job& job, int index, int count, int rank, int size, const JobResult& res,
                double done_bytes, double total_bytes, double seconds) {
  const int width = static_cast<int>(std::to_string(count).size());
  char counter[32];
  std::snprintf(counter, sizeof counter, "[%*d/%d]", width, index + 1, count);
  const TokenShardInfo& i = res.info;
  app::say(cat("prepare: ", counter, " ", job.name, ": ",
               i.num_sentences + res.heldout.num_sentences, " sentences",
               res.heldout.num_sentences ? cat(" (", res.heldout.num_sentences, " held out)") : "",
               ", ", i.num_words + res.heldout.num_words, " words, ",
               i.num_tokens + res.heldout.num_tokens, " tokens, ", i.skipped(), " skipped lines",
               res.reused ? ", reused" : cat(", ", seconds_text(res.seconds)),
               size > 1 ? cat(" (rank ", rank, ")") : std::string(), " | ",
               format_amount_rate_eta(done_bytes, total_bytes, "bytes", seconds), "\n"));
  for (const auto& e : res.examples)
    app::say(cat("  skipped ", e, "\n"));
}

// Rank 0 joins the held-out pieces of --text into the one held-out shard.
void join_heldout(const Options& o, const Communicator& comm, const PrepareInput& in,
                  const std::vector<Job>& jobs, const Totals& heldout) {
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    if (heldout.sentences == 0)
      fail("mtk-lm1b prepare",
           in.heldout_files.empty()
               ? cat("no line was held out (--heldout-fraction ", o.heldout_fraction,
                     " of the corpus's lines): give a larger fraction or held-out files with "
                     "--heldout")
               : std::string("the --heldout files have no valid line"));
    std::vector<std::string> pieces;
    for (const auto& job : jobs)
      if (job.heldout || !job.heldout_output.empty())
        pieces.push_back(job.heldout ? job.output : job.heldout_output);
    const std::string out = heldout_path(o, in);
    const TokenShardInfo info = concatenate_token_shards(pieces, out);
    app::say(cat("prepare: held-out: ", pieces.size(), " pieces joined into ", out, " (",
                 info.num_sentences, " sentences)\n"));
  });
}

}  // namespace

void encode_jobs(const Options& o, const Communicator& comm, const PrepareInput& in,
                 const std::vector<Job>& jobs, const Vocab& vocab, Totals& training,
                 Totals& heldout) {
  const int count = static_cast<int>(jobs.size());
  double total_bytes = 0, done_bytes = 0;
  if (comm.rank() == 0)
    for (const auto& job : jobs)
      total_bytes += static_cast<double>(file_size(job.source));
  const auto start = Clock::now();
  run_rank_jobs(
      comm, count,
      [&](int j) { return run_job(jobs[static_cast<std::size_t>(j)], vocab, o, in).serialize(); },
      [&](int j, int rank, const std::string& text) {
        const Job& job = jobs[static_cast<std::size_t>(j)];
        const JobResult res = JobResult::parse(text);
        (job.heldout ? heldout : training).add(res.info, res.reused);
        if (!job.heldout_output.empty())
          heldout.add(res.heldout, res.reused);
        done_bytes += static_cast<double>(file_size(job.source));
        report_job(job, j, count, rank, comm.size(), res, done_bytes, total_bytes,
                   seconds_since(start));
      });
  if (!in.lm1b) {
    join_heldout(o, comm, in, jobs, heldout);
  }
}

}  // namespace mtk::lm1b
