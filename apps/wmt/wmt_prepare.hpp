#pragma once
// SPDX-License-Identifier: Apache-2.0
// `mtk-wmt prepare`'s parts (wmt_prepare.cpp has the command): the settings with their resolved
// pair sources, why a pair is skipped, and the encoding of the training pairs over the ranks
// (wmt_prepare_encode.cpp).

#include <mtk/data/pair_reader.hpp>
#include <mtk/data/text_corpus.hpp>
#include <mtk/data/wmt_pairs.hpp>

#include "wmt_config.hpp"
#include <cstdint>
#include <string>
#include <vector>

namespace mtk {
class Communicator;
class Vocab;
}  // namespace mtk

namespace mtk::wmt {

/// The data section, and data.train's items resolved to their files.
struct PrepareSettings : DataSettings {
  std::vector<PairSource> sources;
};

/// Why a pair is skipped; counted per reason.
enum Reason {
  kEmptySource,
  kEmptyTarget,
  kInvalidUtf8,
  kTooManyBytes,
  kTooManyTokens,
  kNotTwoColumns,
  kReasons
};
extern const char* const kReasonNames[kReasons];

/// The reason the pair is skipped before encoding, or -1. A NUL byte counts as invalid UTF-8, as
/// mtk-lm1b counts it; `malformed`: a TSV line without exactly one TAB.
int text_reason(const text::RawLine& source, const text::RawLine& target, bool malformed);

/// The header fields of a token shard encoded with `vocab`.
TokenShardInfo shard_info(const Vocab& vocab);

/// The pairs data.test.fraction holds out of data.train (none when it is 0).
HeldoutSplit test_split(const PrepareSettings& s);

/// What encoding the training pairs kept, held out (data.test.fraction) and skipped.
struct TrainingCounts {
  std::int64_t skipped[kReasons] = {}, kept = 0, src_tokens = 0, tgt_tokens = 0, lines = 0;
  std::int64_t held_out = 0;
  void add(const TrainingCounts& other);
  std::string serialize() const;
  static TrainingCounts parse(const std::string& text);
};

/// Encodes the training pairs into data.dir's train.{src,tgt}.tokens on every rank of `comm`:
/// one job per item of data.train, job j on rank j % size (mtk::run_rank_jobs), each into shards
/// of its own, which rank 0 then joins in the items' order (so the shards are the same at any
/// number of ranks). Pairs held out by data.test.fraction go, as text, to data.dir's
/// test.source.txt and test.reference.txt instead. Rank 0 prints each job's line with the share
/// done, the rate and the time left, and gets the totals. All ranks agree on failure.
TrainingCounts encode_training(const PrepareSettings& s, const PreparedPaths& out,
                               const Vocab& vocab, const Communicator& comm);

}  // namespace mtk::wmt
