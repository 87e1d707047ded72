#pragma once
// SPDX-License-Identifier: Apache-2.0
// `mtk-lm1b prepare`'s input and its encoding jobs (mtk_lm1b_prepare.hpp has the command): an
// LM1B-layout corpus (--data) or files of one's own (--text: plain text or JSON Lines, held-out
// lines by fraction or held-out files), one job per input file dealt over the ranks.

#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/text_corpus.hpp>
#include <mtk/data/token_shards.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk {
class Communicator;
class Vocab;
}  // namespace mtk

namespace mtk::lm1b {

struct Options {
  std::string data, out;
  std::vector<std::string> text, heldout;  // --text, --heldout: files or glob patterns
  std::string format = "text", text_field = "text";
  double heldout_fraction = 0.01;  // --text without --heldout
  int vocab_size = 32000;
  std::string model_type = "unigram";
  std::int64_t sample_lines = 1000000;
  std::int64_t max_line_bytes = 4096;
  int training_shards = 0;
  int threads = 1;
  unsigned seed = 1;
  bool strict = false, force = false;
};

/// What prepare reads: an LM1B-layout corpus, or the files of --text and --heldout.
struct PrepareInput {
  bool lm1b = true;
  Lm1bCorpus corpus;                        ///< lm1b
  std::vector<std::string> training_files;  ///< lm1b: the corpus's training shards
  std::vector<std::string> heldout_files;   ///< --heldout (empty: a fraction of the lines)
  HeldoutSplit split;                       ///< --text without --heldout
  std::uint64_t training_bytes() const;
  /// The reader options of every input file (JSON Lines with --format jsonl).
  LineReaderOptions reader_options(const Options& o) const;
};

/// Finds the input (every rank; errors name the missing files).
PrepareInput find_input(const Options& o);

/// One input file to encode.
struct Job {
  std::string name, source, output;
  bool heldout = false;        ///< the whole file is held out (LM1B's shard 00000, --heldout)
  std::string heldout_output;  ///< a fraction split: where the file's held-out lines go
  std::size_t file_index = 0;  ///< for the split
};

/// LM1B: held-out shard 00000 first, then the training shards. --text: the training files, then
/// the --heldout files, whose shards (and the split's held-out pieces) are joined afterwards into
/// heldout_path().
std::vector<Job> make_jobs(const Options& o, const PrepareInput& in);
/// The held-out token shard the manifest names.
std::string heldout_path(const Options& o, const PrepareInput& in);

/// Counts of the shards written, added up by rank 0.
struct Totals {
  LineStats lines;  // counts only
  std::int64_t sentences = 0, tokens = 0, words = 0, shards = 0, reused = 0;
  void add(const TokenShardInfo& info, bool reused_shard);
};

/// Encodes the jobs, job j on rank j % size (mtk::run_rank_jobs); rank 0 prints a line per job
/// with the share done, the rate and the time left, and adds the counts to `training` and
/// `heldout`; then joins the held-out pieces of --text. All ranks agree on failure.
void encode_jobs(const Options& o, const Communicator& comm, const PrepareInput& in,
                 const std::vector<Job>& jobs, const Vocab& vocab, Totals& training,
                 Totals& heldout);

/// "0.42 s", "12.3 s", then "3m05s".
std::string seconds_text(double s);

}  // namespace mtk::lm1b
