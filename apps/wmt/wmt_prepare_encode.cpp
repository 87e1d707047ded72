// SPDX-License-Identifier: Apache-2.0
#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/progress_line.hpp>
#include <mtk/data/rank_jobs.hpp>
#include <mtk/data/text_corpus.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>
#include <mtk/parallel/communicator.hpp>

#include "say.hpp"
#include "wmt_prepare.hpp"
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

namespace mtk::wmt {

namespace fs = std::filesystem;

const char* const kReasonNames[kReasons] = {"empty_source",   "empty_target",    "invalid_utf8",
                                            "too_many_bytes", "too_many_tokens", "not_two_columns"};

int text_reason(const text::RawLine& src, const text::RawLine& tgt, bool malformed) {
  auto blank = [](const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; };
  auto invalid = [](const std::string& s) {
    return std::memchr(s.data(), '\0', s.size()) != nullptr ||
           find_invalid_utf8(s.data(), s.size()) >= 0;
  };
  if (malformed)
    return kNotTwoColumns;
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

HeldoutSplit test_split(const PrepareSettings& s) {
  return {s.test_fraction, 1};
}

void TrainingCounts::add(const TrainingCounts& o) {
  for (int r = 0; r < kReasons; ++r)
    skipped[r] += o.skipped[r];
  kept += o.kept;
  src_tokens += o.src_tokens;
  tgt_tokens += o.tgt_tokens;
  lines += o.lines;
  held_out += o.held_out;
}

std::string TrainingCounts::serialize() const {
  std::ostringstream os;
  os << kept << ' ' << src_tokens << ' ' << tgt_tokens << ' ' << lines << ' ' << held_out;
  for (const auto n : skipped)
    os << ' ' << n;
  return os.str();
}

TrainingCounts TrainingCounts::parse(const std::string& text) {
  TrainingCounts c;
  std::istringstream is(text);
  is >> c.kept >> c.src_tokens >> c.tgt_tokens >> c.lines >> c.held_out;
  for (auto& n : c.skipped)
    is >> n;
  return c;
}

TokenShardInfo shard_info(const Vocab& vocab) {
  TokenShardInfo info;
  info.vocab_size = vocab.size();
  info.eos_id = Vocab::kEosId;
  info.vocab_fingerprint = vocab.fingerprint();
  return info;
}

namespace {

const char* const kTool = "mtk-wmt prepare";

// Job j's files under data.dir/train-parts/: its shards ("src", "tgt") and held-out text
// ("test.source.txt", "test.reference.txt").
std::string part(const PreparedPaths& out, int j, const char* side) {
  char name[64];
  std::snprintf(name, sizeof name, "%05d.%s%s", j + 1, side,
                std::strchr(side, '.') ? "" : ".tokens");
  return (fs::path(out.dir) / "train-parts" / name).string();
}

// Held-out pairs as the text translate reads, one sentence a line.
struct HeldOutText {
  std::ofstream source, reference;
  HeldOutText(const std::string& source_path, const std::string& reference_path)
      : source(source_path, std::ios::binary | std::ios::trunc),
        reference(reference_path, std::ios::binary | std::ios::trunc) {
    if (!source || !reference)
      fail("mtk-wmt prepare", cat("cannot write '", source_path, "' and '", reference_path, "'"));
  }
  void add(const std::string& a, const std::string& b) {
    source << a << '\n';
    reference << b << '\n';
  }
  void close(const std::string& what) {
    source.close();
    reference.close();
    if (!source || !reference)
      fail("mtk-wmt prepare", cat("cannot write ", what, " (disk full?)"));
  }
};

// Appends the files `parts` to `out` (written as out.tmp, renamed when whole), removing them.
void join_text(const std::vector<std::string>& parts, const std::string& out) {
  const std::string tmp = out + ".tmp";
  {
    std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
    for (const auto& p : parts) {
      std::ifstream in(p, std::ios::binary);
      if (in.peek() != std::ifstream::traits_type::eof())
        o << in.rdbuf();
    }
    if (!o.flush())
      fail("mtk-wmt prepare", cat("cannot write '", tmp, "'"));
  }
  fs::rename(tmp, out);
}

// One item of data.train into its two shards; rank 0 shows its progress by bytes read.
TrainingCounts encode_source(const PrepareSettings& s, int j, const PreparedPaths& out,
                             const Vocab& vocab) {
  const PairSource& source = s.sources[static_cast<std::size_t>(j)];
  const std::string src_path = part(out, j, "src"), tgt_path = part(out, j, "tgt");
  const HeldoutSplit split = test_split(s);
  std::unique_ptr<HeldOutText> test;
  if (split.fraction > 0)
    test = std::make_unique<HeldOutText>(part(out, j, "test.source.txt"),
                                         part(out, j, "test.reference.txt"));
  TrainingCounts n;
  PairReader pairs(source, static_cast<std::size_t>(s.max_line_bytes));
  TokenShardWriter src_writer(src_path, shard_info(vocab));
  TokenShardWriter tgt_writer(tgt_path, shard_info(vocab));
  ProgressLine progress(cat("prepare: ", source.item), static_cast<double>(source.bytes()), "bytes",
                        {app::says()});
  text::RawLine a, b;
  bool malformed = false;
  std::vector<std::int32_t> a_ids, b_ids;
  while (pairs.next(a, b, malformed)) {
    if (++n.lines % 1024 == 0)
      progress.update(static_cast<double>(pairs.file_offset()), cat(n.kept, " pairs"));
    int reason = text_reason(a, b, malformed);
    if (test && reason < 0 && split.held_out(static_cast<std::size_t>(j), pairs.line_number())) {
      test->add(a.text, b.text);
      ++n.held_out;
      continue;
    }
    if (reason < 0) {
      a_ids = vocab.encode(a.text);
      b_ids = vocab.encode(b.text);
      // + EOS on each side
      if (static_cast<std::int64_t>(std::max(a_ids.size(), b_ids.size())) + 1 > s.max_length)
        reason = kTooManyTokens;
    }
    if (reason >= 0) {
      ++n.skipped[reason];
      continue;
    }
    src_writer.add_sentence(a_ids, count_words(a.text.data(), a.text.size()));
    tgt_writer.add_sentence(b_ids, count_words(b.text.data(), b.text.size()));
    n.src_tokens += static_cast<std::int64_t>(a_ids.size()) + 1;
    n.tgt_tokens += static_cast<std::int64_t>(b_ids.size()) + 1;
    ++n.kept;
  }
  src_writer.finish();
  tgt_writer.finish();
  if (test)
    test->close(cat("the held-out pairs of ", source.item));
  return n;
}

// Rank 0 joins the jobs' shards into train.{src,tgt}.tokens and removes them.
void join_parts(const PreparedPaths& out, int count, const TrainingCounts& total,
                double test_fraction, const Communicator& comm) {
  collective_step(comm, [&] {
    if (comm.rank() != 0)
      return;
    if (total.kept == 0)
      fail(kTool, cat("every one of the ", total.lines, " training pairs was skipped"));
    if (test_fraction > 0) {
      if (total.held_out == 0)
        fail(kTool, cat("data.test.fraction ", test_fraction, " held out none of the ", total.lines,
                        " pairs: give a larger fraction or a test set of files"));
      for (const char* side : {"source", "reference"}) {
        std::vector<std::string> parts;
        for (int j = 0; j < count; ++j)
          parts.push_back(part(
              out, j, side == std::string("source") ? "test.source.txt" : "test.reference.txt"));
        join_text(parts, cat(out.dir, "/test.", side, ".txt"));
      }
    }
    const auto start = std::chrono::steady_clock::now();
    for (const char* side : {"src", "tgt"}) {
      const std::string joined =
          side == std::string("src") ? out.source("train") : out.target("train");
      std::vector<std::string> parts;
      for (int j = 0; j < count; ++j)
        parts.push_back(part(out, j, side));
      if (count == 1)
        fs::rename(parts.front(), joined);  // one file: its shards are the result
      else
        concatenate_token_shards(parts, joined);
    }
    fs::remove_all(fs::path(out.dir) / "train-parts");
    char took[32];
    std::snprintf(took, sizeof took, "%.1f s",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (count > 1)
      app::say(cat("prepare: the shards of ", count, " items joined into ", out.source("train"),
                   " and ", out.target("train"), " in ", took, "\n"));
  });
}

}  // namespace

TrainingCounts encode_training(const PrepareSettings& s, const PreparedPaths& out,
                               const Vocab& vocab, const Communicator& comm) {
  const int count = static_cast<int>(s.sources.size());
  collective_step(comm, [&] {
    if (comm.rank() == 0)
      make_directories((fs::path(out.dir) / "train-parts").string(), "mtk::make_directories");
  });
  collective_step(comm, [&] {
    if (!fs::is_directory(fs::path(out.dir) / "train-parts"))
      fail(kTool, cat("'", out.dir, "' is not visible on rank ", comm.rank(),
                      ": with several ranks, data.dir must be on a file system all ranks share"));
  });
  double total_bytes = 0, done_bytes = 0;
  for (const auto& source : s.sources)
    total_bytes += static_cast<double>(source.bytes());
  TrainingCounts total;
  const auto start = std::chrono::steady_clock::now();
  const int width = static_cast<int>(std::to_string(count).size());
  run_rank_jobs(
      comm, count, [&](int j) { return encode_source(s, j, out, vocab).serialize(); },
      [&](int j, int rank, const std::string& text) {
        const PairSource& source = s.sources[static_cast<std::size_t>(j)];
        const TrainingCounts n = TrainingCounts::parse(text);
        total.add(n);
        done_bytes += static_cast<double>(source.bytes());
        std::int64_t skipped = 0;
        for (const auto k : n.skipped)
          skipped += k;
        char counter[32];
        std::snprintf(counter, sizeof counter, "[%*d/%d]", width, j + 1, count);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        app::say(cat("prepare: ", counter, " ", source.describe(), ": ", n.kept, " pairs of ",
                     n.lines, ", ", skipped, " skipped",
                     n.held_out ? cat(", ", n.held_out, " held out for test") : std::string(),
                     comm.size() > 1 ? cat(" (rank ", rank, ")") : std::string(), " | ",
                     format_amount_rate_eta(done_bytes, total_bytes, "bytes", seconds), "\n"));
      });
  join_parts(out, count, total, s.test_fraction, comm);
  return total;
}

}  // namespace mtk::wmt
