// `mtk-lm1b prepare` end to end on a small generated corpus in the LM1B layout, at several rank
// counts: vocabulary, token shards, skipped-line accounting, reuse on a re-run, and failures that
// every rank reports together.
#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/data/vocab.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include "lm_data_test_util.hpp"
#include "mtk_lm1b_prepare.hpp"
#include <filesystem>

namespace {

namespace fs = std::filesystem;
using mtk::test::TempDir;

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// The same status on every rank, or -1.
int common_status(int status) {
  int lo = 0, hi = 0;
  MPI_Allreduce(&status, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&status, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi ? status : -1;
}

std::string shard_path(const std::string& corpus, int n) {
  return (fs::path(corpus) / mtk::Lm1bCorpus::kTrainingDir / mtk::lm1b_training_shard_name(n))
      .string();
}

TEST(Prepare, EncodesTheCorpusCountsSkippedLinesAndReusesShards) {
  TempDir dir(MPI_COMM_WORLD);
  const std::string corpus = dir / "corpus", out = dir / "out";
  const auto shard2 = mtk::test::synthetic_sentences(300, 2);
  if (world_rank() == 0) {
    mtk::test::write_lm1b_corpus(corpus, 3, 300, 40);
    // Shard 2 gets an invalid line, an overlong line and an empty line among its sentences.
    std::string text;
    for (std::size_t i = 0; i < shard2.size(); ++i) {
      text += shard2[i] + "\n";
      if (i == 10)
        text += "bad \xFF byte\n";
      if (i == 20)
        text += std::string(300, 'z') + "\n";
      if (i == 30)
        text += "\n";
    }
    mtk::test::write_text(shard_path(corpus, 2), text);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> args = {
      "--data", corpus, "--out", out, "--vocab-size", "350", "--max-line-bytes", "200"};
  ASSERT_EQ(common_status(mtk::lm1b::prepare_main(args)), 0);

  const auto p = mtk::Lm1bPrepared::open(out);
  ASSERT_EQ(p.training_shards.size(), 3u);
  EXPECT_EQ(fs::path(p.heldout_shard).filename(), "news.en.heldout-00000-of-00050.tok");
  const mtk::Vocab vocab = mtk::Vocab::load(p.vocab_model);
  EXPECT_EQ(vocab.size(), 350);

  const auto s2 = mtk::TokenShard::open(p.training_shards[1]);
  EXPECT_EQ(s2.info().vocab_fingerprint, vocab.fingerprint());
  EXPECT_EQ(s2.info().vocab_size, 350);
  EXPECT_EQ(s2.num_sentences(), 300);
  EXPECT_EQ(s2.info().source_lines, 303);
  EXPECT_EQ(s2.info().skipped_invalid_utf8, 1);
  EXPECT_EQ(s2.info().skipped_too_long, 1);
  EXPECT_EQ(s2.info().skipped_empty, 1);
  for (std::int64_t i = 0; i < s2.num_sentences(); ++i) {
    auto want = vocab.encode(shard2[static_cast<std::size_t>(i)]);
    want.push_back(mtk::Vocab::kEosId);
    ASSERT_EQ(s2.sentence(i), want) << "sentence " << i;
  }
  const auto held = mtk::TokenShard::open(p.heldout_shard);
  EXPECT_EQ(held.num_sentences(), 40);

  const std::string summary = mtk::test::read_text(dir / "out/summary.json");
  EXPECT_NE(summary.find("\"training_skipped_invalid_utf8\": 1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"training_skipped_too_long\": 1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"training_sentences\": 900"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"vocab_trained\": 1"), std::string::npos) << summary;
  EXPECT_NE(summary.find("\"heldout_tokens_per_word\": "), std::string::npos) << summary;

  // A re-run reuses the vocabulary and every shard.
  const auto stamp = fs::last_write_time(p.training_shards[2]);
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(common_status(mtk::lm1b::prepare_main(args)), 0);
  EXPECT_EQ(fs::last_write_time(p.training_shards[2]), stamp);
  EXPECT_NE(mtk::test::read_text(dir / "out/summary.json").find("\"vocab_trained\": 0"),
            std::string::npos);

  // A changed training shard changes the text the vocabulary is sampled from: a new vocabulary
  // would replace the folder's (and its checkpoints'), so it needs --force; then the vocabulary is
  // trained again and the shards are encoded again.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0)
    mtk::test::write_text(shard_path(corpus, 3), "a new third shard .\nwith two lines .\n");
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(common_status(mtk::lm1b::prepare_main(args)), 1);
  auto forced = args;
  forced.push_back("--force");
  ASSERT_EQ(common_status(mtk::lm1b::prepare_main(forced)), 0);
  EXPECT_EQ(mtk::TokenShard::open(p.training_shards[2]).num_sentences(), 2);
  EXPECT_NE(mtk::test::read_text(dir / "out/summary.json").find("\"vocab_trained\": 1"),
            std::string::npos);
}

// Rank 0's stderr while `fn` runs (the ranks' errors are printed there).
template <class F>
std::string stderr_of(F&& fn) {
  if (world_rank() == 0)
    testing::internal::CaptureStderr();
  fn();
  return world_rank() == 0 ? testing::internal::GetCapturedStderr() : std::string();
}

// Issue 64 item 7: a folder prepared with 350 pieces, prepared again with 300 and another seed
// (no --force), is refused on every rank naming both settings, there and now, and the command that
// keeps its own settings; vocab.model, the manifest and the shards stay. prepare.command records
// that command (what the damaged-shard advice names); run, it reuses the vocabulary. --force
// replaces it.
TEST(Prepare, OtherSettingsNeedForceAndTheRecordedCommandKeepsTheVocabulary) {
  TempDir dir(MPI_COMM_WORLD);
  const std::string corpus = dir / "corpus", out = dir / "out";
  if (world_rank() == 0)
    mtk::test::write_lm1b_corpus(corpus, 3, 300, 20);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> args = {"--data", corpus, "--out", out, "--vocab-size", "350"};
  ASSERT_EQ(common_status(mtk::lm1b::prepare_main(args)), 0);
  const std::string model = mtk::test::read_text(dir / "out/vocab.model");
  const std::string command = mtk::recorded_prepare_command(out);
  EXPECT_NE(command.find("mtk-lm1b prepare --data " + fs::absolute(corpus).string() + " --out " +
                         fs::absolute(out).string() + " --vocab-size 350 --model-type unigram"),
            std::string::npos)
      << command;
  EXPECT_NE(command.find(" --training-shards 3 --threads 1 --seed 1"), std::string::npos)
      << command;

  int status = 0;
  const std::string err = stderr_of([&] {
    status = common_status(mtk::lm1b::prepare_main(
        {"--data", corpus, "--out", out, "--vocab-size", "300", "--seed", "7"}));
  });
  EXPECT_EQ(status, 1);
  if (world_rank() == 0) {
    EXPECT_NE(err.find("'" + out +
                       "' was prepared with other settings: --vocab-size 350 there, "
                       "300 now; --seed 1 there, 7 now"),
              std::string::npos)
        << err;
    EXPECT_NE(err.find("To keep it, run `" + command + "`; to replace it, give --force"),
              std::string::npos)
        << err;
  }
  EXPECT_EQ(mtk::test::read_text(dir / "out/vocab.model"), model);
  EXPECT_TRUE(fs::exists(dir / "out/manifest.txt"));
  EXPECT_EQ(mtk::Vocab::load(mtk::Lm1bPrepared::open(out).vocab_model).size(), 350);

  // A damaged shard's error names the recorded command.
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string shard = mtk::Lm1bPrepared::training_shard_path(out, 2);
  if (world_rank() == 0) {
    std::string bytes = mtk::test::read_text(shard);
    bytes.resize(bytes.size() - 3);
    mtk::test::write_text(shard, bytes);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::string damaged;
  try {
    mtk::TokenShard::open(shard);
  } catch (const std::exception& e) {
    damaged = e.what();
  }
  EXPECT_NE(damaged.find("(truncated or damaged: run `" + command + "` again"), std::string::npos)
      << damaged;
  // The recorded command keeps the vocabulary and mends the shard; --force replaces it.
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(common_status(mtk::lm1b::prepare_main(args)), 0);
  EXPECT_EQ(mtk::test::read_text(dir / "out/vocab.model"), model);
  EXPECT_NO_THROW(mtk::TokenShard::open(shard).tokens());
  MPI_Barrier(MPI_COMM_WORLD);
  ASSERT_EQ(common_status(mtk::lm1b::prepare_main(
                {"--data", corpus, "--out", out, "--vocab-size", "300", "--force"})),
            0);
  EXPECT_EQ(mtk::Vocab::load(mtk::Lm1bPrepared::open(out).vocab_model).size(), 300);
  EXPECT_NE(mtk::recorded_prepare_command(out).find("--vocab-size 300"), std::string::npos);
}

TEST(Prepare, BadInputFailsOnEveryRank) {
  TempDir dir(MPI_COMM_WORLD);
  const std::string corpus = dir / "corpus", out = dir / "out";
  if (world_rank() == 0)
    mtk::test::write_lm1b_corpus(corpus, 5, 60, 10);
  MPI_Barrier(MPI_COMM_WORLD);
  const std::vector<std::string> base = {"--data", corpus, "--out", out, "--vocab-size", "300"};

  // Usage errors.
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main({"--data", corpus})), 2);
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main({"--bogus"})), 2);
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main({"--vocab-size", "many"})), 2);
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main({"--help"})), 0);

  // A missing corpus folder.
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main({"--data", dir / "none", "--out", out})), 1);

  // An empty shard: found by whichever rank encodes it; all ranks fail together.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0)
    mtk::test::write_text(shard_path(corpus, 4), "");
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main(base)), 1);
  EXPECT_FALSE(fs::exists(dir / "out/manifest.txt"));

  // An invalid line in strict mode.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0)
    mtk::test::write_text(shard_path(corpus, 4), "good line .\nbad \xC3\x28 line\n");
  MPI_Barrier(MPI_COMM_WORLD);
  auto strict = base;
  strict.push_back("--strict");
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main(strict)), 1);
  // Without --strict the line is skipped and counted.
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main(base)), 0);
  EXPECT_EQ(mtk::TokenShard::read_info(mtk::Lm1bPrepared::training_shard_path(out, 4))
                .skipped_invalid_utf8,
            1);

  // The same, found while encoding (the line lies beyond the vocabulary sample's 20 lines per
  // shard), by rank 3 % size: the other ranks fail with it.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    auto lines = mtk::test::synthetic_sentences(60, 3);
    lines[40] = "bad \xC3\x28 line";
    mtk::test::write_text(shard_path(corpus, 3), mtk::test::join_lines(lines));
    mtk::test::write_text(shard_path(corpus, 4),
                          mtk::test::join_lines(mtk::test::synthetic_sentences(60, 4)));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  auto sampled = strict;
  sampled.insert(sampled.end(), {"--sample-lines", "100", "--force"});
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main(sampled)), 1);

  // A gap in the training shards.
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0)
    fs::remove(shard_path(corpus, 2));
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(common_status(mtk::lm1b::prepare_main(base)), 1);
}

}  // namespace
