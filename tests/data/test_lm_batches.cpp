// Packing, order, resume and per-rank slices of language-model batches. Registered at 1, 2 and 4
// ranks: the slices of every rank, put together, must be the batch one rank computes alone.
#include <mtk/base/error.hpp>
#include <mtk/data/impl/shard_checksums.hpp>
#include <mtk/data/lm_batches.hpp>
#include <mtk/data/token_shards.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include "error_text.hpp"
#include "lm_data_test_util.hpp"
#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

namespace {

using mtk::test::error_of;

using mtk::LmBatch;
using mtk::LmBatchOptions;
using mtk::LmBatchStream;
using mtk::PackedSequences;
using mtk::TokenShardInfo;
using mtk::TokenShardWriter;
using Ids = std::vector<std::int32_t>;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// Writes one shard per entry of `shards` (on rank 0) and returns their paths.
std::vector<std::string> write_shards(const mtk::test::TempDir& dir,
                                      const std::vector<std::vector<Ids>>& shards,
                                      std::int32_t vocab = 50) {
  std::vector<std::string> paths;
  for (std::size_t s = 0; s < shards.size(); ++s) {
    paths.push_back(dir / ("shard" + std::to_string(s) + ".tok"));
    if (world_rank() != 0)
      continue;
    TokenShardInfo info;
    info.vocab_size = vocab;
    info.eos_id = 1;
    info.vocab_fingerprint = 77;
    TokenShardWriter w(paths.back(), info);
    for (const auto& sentence : shards[s])
      w.add_sentence(sentence, 1);
    w.finish();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return paths;
}

Ids range(std::int32_t from, std::int32_t to) {  // [from, to)
  Ids v;
  for (std::int32_t i = from; i < to; ++i)
    v.push_back(i);
  return v;
}

struct Row {
  Ids inputs, targets, segments, positions;
};

Row row_of(const PackedSequences& p, std::int64_t s) {
  const auto L = static_cast<std::size_t>(p.length());
  Row r{Ids(L), Ids(L), Ids(L), Ids(L)};
  p.fill(s, r.inputs.data(), r.targets.data(), r.segments.data(), r.positions.data());
  return r;
}

// Random sentences (ids 2..vocab-1) of 1..max_len tokens in `shards` shards.
std::vector<std::vector<Ids>> random_shards(int shards, int sentences, int max_len,
                                            std::uint64_t seed) {
  mtk::test::TestRng rng(seed);
  std::vector<std::vector<Ids>> out(static_cast<std::size_t>(shards));
  for (auto& shard : out)
    for (int i = 0; i < sentences; ++i) {
      Ids s;
      const int n = rng.uniform(1, max_len);
      for (int k = 0; k < n; ++k)
        s.push_back(rng.uniform(2, 49));
      shard.push_back(s);
    }
  return out;
}

TEST(Packing, SegmentsPositionsAndCuts) {
  mtk::test::TempDir dir(MPI_COMM_WORLD);
  const auto paths =
      write_shards(dir, {{{10, 11}, {12, 13, 14}, {15, 16}, range(20, 39), {40, 41, 42}, {43}},
                         {{44, 45, 46, 47, 48, 49, 2}, {3}}});
  const auto p = PackedSequences::open(paths, 8);
  EXPECT_EQ(p->size(), 8);
  EXPECT_EQ(p->num_tokens(), 46);
  EXPECT_EQ(p->num_sentences(), 8);
  EXPECT_EQ(p->num_cut_sentences(), 1);
  EXPECT_EQ(p->vocab_size(), 50);

  Row r = row_of(*p, 0);
  EXPECT_EQ(r.targets, (Ids{10, 11, 1, 12, 13, 14, 1, 0}));
  EXPECT_EQ(r.inputs, (Ids{0, 10, 11, 0, 12, 13, 14, 0}));
  EXPECT_EQ(r.segments, (Ids{1, 1, 1, 2, 2, 2, 2, 0}));
  EXPECT_EQ(r.positions, (Ids{0, 1, 2, 0, 1, 2, 3, 0}));
  // {15, 16} does not fit after 7 tokens: it starts the next sequence, not split.
  r = row_of(*p, 1);
  EXPECT_EQ(r.targets, (Ids{15, 16, 1, 0, 0, 0, 0, 0}));
  EXPECT_EQ(r.segments, (Ids{1, 1, 1, 0, 0, 0, 0, 0}));
  // The 20-token sentence is cut into 8 + 8 + 4; each piece is a segment starting at position 0.
  r = row_of(*p, 2);
  EXPECT_EQ(r.targets, range(20, 28));
  EXPECT_EQ(r.inputs, (Ids{0, 20, 21, 22, 23, 24, 25, 26}));
  EXPECT_EQ(r.positions, (Ids{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(r.segments, Ids(8, 1));
  r = row_of(*p, 3);
  EXPECT_EQ(r.targets, range(28, 36));
  EXPECT_EQ(r.inputs[0], 0);
  EXPECT_EQ(r.positions[0], 0);
  // The last piece is followed by the next sentence.
  r = row_of(*p, 4);
  EXPECT_EQ(r.targets, (Ids{36, 37, 38, 1, 40, 41, 42, 1}));
  EXPECT_EQ(r.inputs, (Ids{0, 36, 37, 38, 0, 40, 41, 42}));
  EXPECT_EQ(r.segments, (Ids{1, 1, 1, 1, 2, 2, 2, 2}));
  EXPECT_EQ(r.positions, (Ids{0, 1, 2, 3, 0, 1, 2, 3}));
  r = row_of(*p, 5);
  EXPECT_EQ(r.targets, (Ids{43, 1, 0, 0, 0, 0, 0, 0}));
  // Sequences never mix shards; a sentence of exactly the length fills one sequence.
  r = row_of(*p, 6);
  EXPECT_EQ(r.targets, (Ids{44, 45, 46, 47, 48, 49, 2, 1}));
  EXPECT_EQ(r.segments, Ids(8, 1));
  r = row_of(*p, 7);
  EXPECT_EQ(r.targets, (Ids{3, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(p->tokens_in(7), 2);
  r = row_of(*p, -1);
  EXPECT_EQ(r.targets, Ids(8, 0));
  EXPECT_THROW(row_of(*p, 8), mtk::Error);
}

TEST(Packing, CoversEveryTokenOnceAndSplitsOnlyLongSentences) {
  mtk::test::TempDir dir(MPI_COMM_WORLD);
  const auto shards = random_shards(3, 200, 24, 5);
  const auto paths = write_shards(dir, shards);
  const std::int64_t L = 16;
  const auto p = PackedSequences::open(paths, L);
  // The real tokens of all sequences in order are the shards' tokens in order.
  Ids all, expected;
  std::set<std::int64_t> starts;  // global token index where each sequence starts
  std::int64_t at = 0;
  for (std::int64_t s = 0; s < p->size(); ++s) {
    const Row r = row_of(*p, s);
    const std::int64_t n = p->tokens_in(s);
    ASSERT_GT(n, 0);
    ASSERT_LE(n, L);
    for (std::int64_t i = 0; i < L; ++i) {
      EXPECT_EQ(r.segments[static_cast<std::size_t>(i)] != 0, i < n);
      if (i < n)
        all.push_back(r.targets[static_cast<std::size_t>(i)]);
    }
    starts.insert(at);
    at += n;
  }
  std::int64_t cut = 0, b = 0;
  for (const auto& shard : shards)
    for (const auto& sentence : shard) {
      expected.insert(expected.end(), sentence.begin(), sentence.end());
      expected.push_back(1);
      const auto e = b + static_cast<std::int64_t>(sentence.size()) + 1;
      if (e - b <= L) {
        // No sequence starts strictly inside a sentence that fits.
        EXPECT_EQ(starts.upper_bound(b), starts.lower_bound(e)) << "sentence at " << b;
      } else {
        ++cut;
      }
      b = e;
    }
  EXPECT_EQ(all, expected);
  EXPECT_EQ(p->num_tokens(), static_cast<std::int64_t>(expected.size()));
  EXPECT_EQ(p->num_cut_sentences(), cut);
  EXPECT_GT(cut, 0);
}

TEST(Packing, RefusesMixedVocabularies) {
  mtk::test::TempDir dir(MPI_COMM_WORLD);
  auto paths = write_shards(dir, {{{5}}});
  const std::string other = dir / "other.tok";
  if (world_rank() == 0) {
    TokenShardInfo info;
    info.vocab_size = 60;
    info.vocab_fingerprint = 78;
    TokenShardWriter w(other, info);
    w.add_sentence({5}, 1);
    w.finish();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  paths.push_back(other);
  const std::string e = error_of([&] { PackedSequences::open(paths, 8); });
  EXPECT_NE(e.find("another vocabulary"), std::string::npos) << e;
  EXPECT_THROW(PackedSequences::open({}, 8), mtk::Error);
  EXPECT_THROW(PackedSequences::open({paths[0]}, 0), mtk::Error);
}

TEST(IndexPermutation, IsADeterministicBijection) {
  for (std::int64_t n : {1, 2, 3, 5, 17, 100, 1000, 4097}) {
    const mtk::IndexPermutation p(n, 42), q(n, 42), other(n, 43);
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    int moved = 0, differ = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto j = p(i);
      ASSERT_GE(j, 0);
      ASSERT_LT(j, n);
      EXPECT_FALSE(seen[static_cast<std::size_t>(j)]) << "n " << n;
      seen[static_cast<std::size_t>(j)] = 1;
      EXPECT_EQ(q(i), j);
      moved += j != i;
      differ += other(i) != j;
    }
    if (n >= 100) {
      EXPECT_GT(moved, n * 9 / 10) << n;
      EXPECT_GT(differ, n * 9 / 10) << n;
    }
  }
}

class Stream : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<mtk::test::TempDir>(MPI_COMM_WORLD);
    paths_ = write_shards(*dir_, random_shards(3, 60, 12, 9));
    seqs_ = PackedSequences::open(paths_, 16);
  }
  void TearDown() override { dir_.reset(); }
  std::unique_ptr<mtk::test::TempDir> dir_;
  std::vector<std::string> paths_;
  std::shared_ptr<const PackedSequences> seqs_;
};

void expect_same(const LmBatch& a, const LmBatch& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_EQ(a.segment_ids, b.segment_ids);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_EQ(a.global_tokens, b.global_tokens);
}

TEST_F(Stream, RowsFollowTheSeededOrderAndEachEpochIsAPermutation) {
  LmBatchOptions o;
  o.global_batch = 4;
  o.seed = 3;
  LmBatchStream s(seqs_, o);
  const std::int64_t n = seqs_->size();
  ASSERT_GT(n, 20);
  std::vector<std::int64_t> first_epoch;
  for (std::int64_t e = 0; e < 2; ++e) {
    std::set<std::int64_t> seen;
    for (std::int64_t k = 0; k < n; ++k)
      seen.insert(s.sequence_at(e, k));
    EXPECT_EQ(static_cast<std::int64_t>(seen.size()), n);
  }
  EXPECT_NE(s.sequence_at(0, 0) * n + s.sequence_at(0, 1),
            s.sequence_at(1, 0) * n + s.sequence_at(1, 1));
  // Batches straddle the epoch boundary: row g is sequence_at(g / n, g % n).
  const std::int64_t steps = n / 4 + 3;
  LmBatch first_batch;
  for (std::int64_t t = 0; t < steps; ++t) {
    const LmBatch b = s.next();
    if (t == 0)
      first_batch = b;
    EXPECT_EQ(b.position.epoch * n + b.position.index, t * 4);
    std::int64_t tokens = 0;
    for (std::int64_t r = 0; r < 4; ++r) {
      const std::int64_t g = t * 4 + r;
      const std::int64_t seq = s.sequence_at(g / n, g % n);
      const Row want = row_of(*seqs_, seq);
      const auto at = static_cast<std::ptrdiff_t>(r * 16);
      EXPECT_TRUE(std::equal(want.targets.begin(), want.targets.end(), b.targets.begin() + at));
      EXPECT_TRUE(std::equal(want.inputs.begin(), want.inputs.end(), b.inputs.begin() + at));
      EXPECT_TRUE(
          std::equal(want.segments.begin(), want.segments.end(), b.segment_ids.begin() + at));
      EXPECT_TRUE(
          std::equal(want.positions.begin(), want.positions.end(), b.positions.begin() + at));
      tokens += seqs_->tokens_in(seq);
    }
    EXPECT_EQ(b.global_tokens, tokens);
    EXPECT_EQ(b.local_tokens, tokens);
  }
  // The same seed gives the same stream; another seed another order.
  LmBatchStream again(seqs_, o);
  expect_same(again.next(), first_batch);
  o.seed = 4;
  LmBatchStream other(seqs_, o);
  int differ = 0;
  for (std::int64_t k = 0; k < n; ++k)
    differ += other.sequence_at(0, k) != s.sequence_at(0, k);
  EXPECT_GT(differ, n / 2);
}

TEST_F(Stream, ResumeEqualsAnUninterruptedStream) {
  LmBatchOptions o;
  o.global_batch = 6;
  o.seed = 11;
  LmBatchStream full(seqs_, o);
  std::vector<LmBatch> expected;
  for (int t = 0; t < 12; ++t)
    expected.push_back(full.next());

  LmBatchStream first(seqs_, o);
  for (int t = 0; t < 5; ++t)
    first.next();
  const std::string saved = first.save();
  EXPECT_EQ(saved.rfind("lm-position v1 epoch=", 0), 0u) << saved;

  LmBatchStream resumed(seqs_, o);
  resumed.restore(saved);
  EXPECT_EQ(resumed.position(), first.position());
  for (int t = 5; t < 12; ++t)
    expect_same(resumed.next(), expected[static_cast<std::size_t>(t)]);

  // The position counts rows, so a different batch size continues the same row stream.
  LmBatchOptions half = o;
  half.global_batch = 3;
  LmBatchStream smaller(seqs_, half);
  smaller.restore(saved);
  const LmBatch a = smaller.next(), b = smaller.next();
  Ids joined = a.targets;
  joined.insert(joined.end(), b.targets.begin(), b.targets.end());
  EXPECT_EQ(joined, expected[5].targets);
}

TEST_F(Stream, RestoreRefusesOtherStreams) {
  LmBatchOptions o;
  o.global_batch = 2;
  LmBatchStream s(seqs_, o);
  s.next();
  const std::string saved = s.save();
  LmBatchOptions other = o;
  other.seed = 99;
  LmBatchStream t(seqs_, other);
  std::string e = error_of([&] { t.restore(saved); });
  EXPECT_NE(e.find("seed 1 (now 99)"), std::string::npos) << e;
  auto longer = PackedSequences::open(paths_, 32);
  LmBatchStream u(longer, o);
  e = error_of([&] { u.restore(saved); });
  EXPECT_NE(e.find("length 16 (now 32)"), std::string::npos) << e;
  EXPECT_THROW(t.restore("garbage"), mtk::Error);
  EXPECT_THROW(t.restore("lm-position v1 epoch=x index=0"), mtk::Error);
  EXPECT_THROW(t.seek({0, seqs_->size()}), mtk::Error);
}

// Every rank takes its slice; together they are the batch a single slice holds.
void check_slices(const std::shared_ptr<const PackedSequences>& seqs, int slices, int slice,
                  MPI_Comm group) {
  LmBatchOptions whole;
  whole.global_batch = 8;
  whole.seed = 5;
  LmBatchOptions part = whole;
  part.batch_slices = slices;
  part.slice_index = slice;
  LmBatchStream reference(seqs, whole), mine(seqs, part);
  for (int t = 0; t < 6; ++t) {
    const LmBatch all = reference.next();
    const LmBatch b = mine.next();
    ASSERT_EQ(b.rows, 8 / slices);
    EXPECT_EQ(b.first_row, b.rows * slice);
    EXPECT_EQ(b.global_tokens, all.global_tokens);
    const auto cells = static_cast<int>(b.rows * b.length);
    for (const auto& [got, want] : {std::pair{&b.inputs, &all.inputs},
                                    {&b.targets, &all.targets},
                                    {&b.segment_ids, &all.segment_ids},
                                    {&b.positions, &all.positions}}) {
      Ids stitched(static_cast<std::size_t>(cells * slices));
      MPI_Allgather(got->data(), cells, MPI_INT32_T, stitched.data(), cells, MPI_INT32_T, group);
      EXPECT_EQ(stitched, *want);
    }
    long long local = b.local_tokens, sum = 0;
    MPI_Allreduce(&local, &sum, 1, MPI_LONG_LONG, MPI_SUM, group);
    EXPECT_EQ(sum, all.global_tokens);
  }
}

TEST_F(Stream, SlicesOfAllRanksStitchToTheGlobalBatch) {
  // The batch split over every rank (a 1-D mesh, batch on its only dim).
  check_slices(seqs_, world_size(), world_rank(), MPI_COMM_WORLD);
  // A 2-D mesh a:2;b:P/2 with batch on `a`: ranks with the same `a` coordinate hold the same
  // slice; the ranks of one `b` column together hold the batch.
  if (world_size() % 2 == 0) {
    const int a = world_rank() / (world_size() / 2), bcoord = world_rank() % (world_size() / 2);
    MPI_Comm column;
    MPI_Comm_split(MPI_COMM_WORLD, bcoord, a, &column);
    check_slices(seqs_, 2, a, column);
    MPI_Comm_free(&column);
  }
}

TEST_F(Stream, OnePassForEvaluation) {
  LmBatchOptions o;
  o.global_batch = 5;
  o.shuffle = false;
  o.repeat = false;
  LmBatchStream s(seqs_, o);
  const std::int64_t n = seqs_->size();
  EXPECT_EQ(s.batches_per_epoch(), (n + 4) / 5);
  std::int64_t steps = 0, sequences = 0, tokens = 0;
  while (!s.done()) {
    const LmBatch b = s.next();
    sequences += b.global_sequences;
    tokens += b.global_tokens;
    ++steps;
  }
  EXPECT_EQ(steps, s.batches_per_epoch());
  EXPECT_EQ(sequences, n);
  EXPECT_EQ(tokens, seqs_->num_tokens());
  EXPECT_THROW(s.next(), mtk::Error);
  EXPECT_EQ(s.sequence_at(0, 3), 3);
}

TEST_F(Stream, OptionErrors) {
  LmBatchOptions o;
  o.global_batch = 10;
  o.batch_slices = 4;
  const std::string e = error_of([&] { LmBatchStream(seqs_, o); });
  EXPECT_NE(e.find("global batch 10 is not divisible by the 4 slices"), std::string::npos) << e;
  o.batch_slices = 2;
  o.slice_index = 2;
  EXPECT_THROW(LmBatchStream(seqs_, o), mtk::Error);
  o.slice_index = 0;
  o.global_batch = 0;
  EXPECT_THROW(LmBatchStream(seqs_, o), mtk::Error);
}

}  // namespace

namespace {

// An id outside the vocabulary in a shard whose checksums are right (the header's vocabulary
// size lowered after writing): every rank's next() fails with the same message naming the file
// and the token, not only the rank whose rows hold it (issue 15, item 9).
TEST(StreamErrors, IdOutsideTheVocabularyStopsEveryRankWithTheSameMessage) {
  mtk::test::TempDir dir(MPI_COMM_WORLD);
  std::vector<std::vector<Ids>> shards(1);
  for (int s = 0; s < 16; ++s)
    shards[0].push_back(Ids{2, 3, s == 11 ? 45 : 4});
  const auto paths = write_shards(dir, shards, 50);
  if (world_rank() == 0) {
    std::string file = mtk::test::read_text(paths[0]);
    const std::int32_t vocab = 40;  // id 45 is now outside
    std::memcpy(&file[16], &vocab, 4);
    const std::uint64_t h = mtk::shard_checksums::xxh3_64(file.data(), 120);  // the header's
    std::memcpy(&file[120], &h, 8);
    mtk::test::write_text(paths[0], file);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto seqs = PackedSequences::open(paths, 4);  // one sentence per sequence
  ASSERT_EQ(seqs->size(), 16);
  LmBatchOptions o;
  o.global_batch = 16;
  o.batch_slices = world_size() <= 4 ? world_size() : 1;
  o.slice_index = world_size() <= 4 ? world_rank() : 0;
  o.shuffle = false;
  LmBatchStream stream(seqs, o);
  const std::string e = error_of([&] { stream.next(); });
  EXPECT_NE(e.find(paths[0]), std::string::npos) << "rank " << world_rank() << ": " << e;
  EXPECT_NE(e.find("token 46 is 45, outside the vocabulary of 40"), std::string::npos)
      << "rank " << world_rank() << ": " << e;
  // The same message on every rank.
  int length = static_cast<int>(e.size()), max_length = 0, min_length = 0;
  MPI_Allreduce(&length, &max_length, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&length, &min_length, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  EXPECT_EQ(min_length, max_length);
}

}  // namespace
