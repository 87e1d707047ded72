// Translation batches (io/mtk/data/wmt_pairs.hpp): one pair a row or packed rows, every pair once
// an epoch, segment ids / positions / shifted decoder inputs, per-rank slices, the resume position.
#include <mtk/base/error.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/data/wmt_pairs.hpp>

#include <gtest/gtest.h>

#include "lm_data_test_util.hpp"
#include <map>
#include <random>
#include <set>

namespace {

using mtk::TokenShard;
using mtk::TokenShardInfo;
using mtk::TokenShardWriter;
using mtk::test::TempDir;
using mtk::wmt::PairBatch;
using mtk::wmt::PairStream;

constexpr std::int64_t kPairs = 97, kLength = 16;

// Pair p: source [p+2, ..., p+2, 1 (EOS)] of 2..9 tokens, target of 2..12 tokens; ids
// encode the pair so that every row can be traced back.
struct Shards {
  TempDir dir;
  std::string source = dir / "s.tok", target = dir / "t.tok";
  std::vector<std::vector<std::int32_t>> src, tgt;
  Shards() {
    std::mt19937 rng(3);
    TokenShardInfo info;
    info.vocab_size = 1000;
    info.eos_id = 1;
    TokenShardWriter ws(source, info), wt(target, info);
    for (std::int64_t p = 0; p < kPairs; ++p) {
      const auto id = static_cast<std::int32_t>(p + 2);
      // The writer appends the end-of-sentence id 1.
      std::vector<std::int32_t> s(1 + rng() % 8, id), t(1 + rng() % 11, id);
      if (p == 5)
        t.assign(kLength + 3, id);  // longer than a row: cut to kLength
      ws.add_sentence(s, 1);
      wt.add_sentence(t, 1);
      s.push_back(1);
      t.push_back(1);
      src.push_back(s);
      tgt.push_back(t);
    }
    ws.finish();
    wt.finish();
  }
  PairStream stream(std::int64_t batch, bool pack, int slices = 1, int slice = 0) const {
    return PairStream(TokenShard::open(source), TokenShard::open(target), batch, kLength, slices,
                      slice, 7, pack);
  }
};

// The pairs of one row, checked against the shards: segments 1, 2, ... in order on both sides,
// positions restarting, the decoder input the target shifted right behind 0 per segment.
std::vector<std::int64_t> pairs_of_row(const Shards& d, const PairBatch& b, std::int64_t row) {
  std::vector<std::int64_t> pairs;
  std::map<std::int32_t, std::int64_t> source_len, target_len;
  for (std::int64_t i = 0; i < kLength; ++i) {
    const auto k = static_cast<size_t>(row * kLength + i);
    if (b.segments[k] > 0) {
      const std::int64_t pos = target_len[b.segments[k]]++;
      EXPECT_EQ(b.positions[k], pos);
      if (pos == 0) {
        pairs.push_back(b.targets[k] - 2);
        EXPECT_EQ(b.inputs[k], 0) << "row " << row << " position " << i;
      } else {
        EXPECT_EQ(b.inputs[k], b.targets[k - 1]);
        EXPECT_EQ(b.segments[k - 1], b.segments[k]);
      }
    }
    if (b.source_segments[k] > 0) {
      EXPECT_EQ(b.source_positions[k], source_len[b.source_segments[k]]++);
    }
  }
  for (size_t s = 0; s < pairs.size(); ++s) {
    const auto segment = static_cast<std::int32_t>(s + 1);
    const auto p = static_cast<size_t>(pairs[s]);
    EXPECT_EQ(target_len[segment], std::min<std::int64_t>(kLength, d.tgt[p].size()));
    EXPECT_EQ(source_len[segment], static_cast<std::int64_t>(d.src[p].size()));
  }
  EXPECT_EQ(source_len.size(), pairs.size()) << "row " << row;
  return pairs;
}

}  // namespace

TEST(WmtPairs, PackedRowsHoldEveryPairOnceAnEpochAndFit) {
  const Shards d;
  for (bool pack : {false, true}) {
    PairStream s = d.stream(1, pack);  // one row a step: the epoch ends with a step
    if (pack)
      EXPECT_LT(s.rows_per_epoch(), kPairs / 2) << "pairs of 2-12 tokens in rows of 16";
    else
      EXPECT_EQ(s.rows_per_epoch(), kPairs);
    std::multiset<std::int64_t> seen;
    std::int64_t tokens = 0, counted = 0;
    for (std::int64_t step = 0; step < s.batches_per_epoch() && s.epoch() == 0; ++step) {
      const PairBatch b = s.next();
      counted += b.global_tokens;
      for (std::int64_t r = 0; r < b.rows; ++r)
        for (std::int64_t p : pairs_of_row(d, b, r)) {
          seen.insert(p);
          tokens += std::min<std::int64_t>(kLength, d.tgt[static_cast<size_t>(p)].size());
        }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(kPairs)) << "pack " << pack;
    EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), seen.size());
    EXPECT_EQ(tokens, counted);
  }
}

TEST(WmtPairs, RankSlicesMakeUpTheGlobalBatch) {
  const Shards d;
  PairStream whole = d.stream(4, true), first = d.stream(4, true, 2, 0),
             second = d.stream(4, true, 2, 1);
  for (int step = 0; step < 12; ++step) {  // past the end of the first epoch
    const PairBatch w = whole.next(), a = first.next(), b = second.next();
    ASSERT_EQ(a.rows, 2);
    EXPECT_EQ(a.global_tokens, w.global_tokens);
    for (std::int64_t r = 0; r < 2; ++r) {
      EXPECT_EQ(pairs_of_row(d, a, r), pairs_of_row(d, w, r));
      EXPECT_EQ(pairs_of_row(d, b, r), pairs_of_row(d, w, r + 2));
    }
  }
}

TEST(WmtPairs, ResumeContinuesThePackedOrderAndRefusesAnotherPacking) {
  const Shards d;
  PairStream s = d.stream(4, true);
  for (int i = 0; i < 9; ++i)
    s.next();
  const std::string position = s.save();
  EXPECT_NE(position.find(" packed_rows="), std::string::npos) << position;
  PairStream resumed = d.stream(4, true);
  resumed.restore(position);
  for (int i = 0; i < 3; ++i) {
    const PairBatch a = s.next(), b = resumed.next();
    EXPECT_EQ(a.targets, b.targets);
    EXPECT_EQ(a.sources, b.sources);
  }
  PairStream unpacked = d.stream(4, false);
  try {
    unpacked.restore(position);
    FAIL() << "a packed position was accepted by an unpacked stream";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("data.pack = true"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.restore(d.stream(4, false).save()), mtk::Error);
}
