// Token shards: write / read round trip, header checks, damaged and unfinished files.
#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/token_shards.hpp>

#include <gtest/gtest.h>

#include "lm_data_test_util.hpp"
#include <filesystem>
#include <functional>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using mtk::TokenShard;
using mtk::TokenShardInfo;
using mtk::TokenShardWriter;
using mtk::test::TempDir;

TokenShardInfo header(std::int32_t vocab = 100) {
  TokenShardInfo info;
  info.vocab_size = vocab;
  info.eos_id = 1;
  info.vocab_fingerprint = 0xABCDEF;
  info.source_bytes = 1234;
  info.max_line_bytes = 4096;
  return info;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const mtk::Error& e) {
    return e.what();
  }
  return "";
}

TEST(TokenShards, WriteReadRoundTrip) {
  TempDir dir;
  const std::string path = dir / "a.tok";
  const std::vector<std::vector<std::int32_t>> sentences = {{5, 6, 7}, {8}, {9, 10, 11, 12, 13}};
  {
    TokenShardWriter w(path, header());
    for (const auto& s : sentences)
      w.add_sentence(s, static_cast<std::int64_t>(s.size()) + 1);
    mtk::LineStats stats;
    stats.lines = 5;
    stats.empty = 1;
    stats.too_long = 1;
    w.set_source_stats(stats);
    const auto info = w.finish();
    EXPECT_EQ(info.num_sentences, 3);
    EXPECT_EQ(info.num_tokens, 12);
  }
  EXPECT_FALSE(fs::exists(path + ".tmp-" + std::to_string(::getpid())));
  const TokenShard shard = TokenShard::open(path);
  EXPECT_EQ(shard.num_sentences(), 3);
  EXPECT_EQ(shard.num_tokens(), 12);
  const auto& info = shard.info();
  EXPECT_EQ(info.vocab_size, 100);
  EXPECT_EQ(info.vocab_fingerprint, 0xABCDEFu);
  EXPECT_EQ(info.num_words, 12);
  EXPECT_EQ(info.source_lines, 5);
  EXPECT_EQ(info.skipped(), 2);
  EXPECT_EQ(shard.sentence(0), (std::vector<std::int32_t>{5, 6, 7, 1}));
  EXPECT_EQ(shard.sentence(1), (std::vector<std::int32_t>{8, 1}));
  EXPECT_EQ(shard.sentence(2), (std::vector<std::int32_t>{9, 10, 11, 12, 13, 1}));
  EXPECT_EQ(shard.sentence_offset(3), 12);
  EXPECT_EQ(shard.tokens()[4], 8);
  EXPECT_THROW(shard.sentence(3), mtk::Error);
  // Header, 12 tokens padded to 8 bytes, 4 offsets.
  EXPECT_EQ(fs::file_size(path), 128u + 48u + 32u);
  EXPECT_EQ(TokenShard::read_info(path).num_tokens, 12);
}

TEST(TokenShards, EmptyShardAndCopies) {
  TempDir dir;
  const std::string path = dir / "empty.tok";
  TokenShardWriter(path, header()).finish();
  const TokenShard a = TokenShard::open(path);
  const TokenShard b = a;  // shares the mapping
  EXPECT_EQ(b.num_sentences(), 0);
  EXPECT_EQ(b.num_tokens(), 0);
}

TEST(TokenShards, RejectsBadIds) {
  TempDir dir;
  TokenShardWriter w(dir / "x.tok", header(10));
  std::string e = error_of([&] { w.add_sentence({3, 1, 4}, 3); });
  EXPECT_NE(e.find("end-of-sentence"), std::string::npos) << e;
  e = error_of([&] { w.add_sentence({3, 10}, 2); });
  EXPECT_NE(e.find("has id 10"), std::string::npos) << e;
  EXPECT_THROW(TokenShardWriter(dir / "y.tok", header(0)), mtk::Error);
}

TEST(TokenShards, UnfinishedWriterLeavesNothing) {
  TempDir dir;
  const std::string path = dir / "u.tok";
  {
    TokenShardWriter w(path, header());
    w.add_sentence({4, 5}, 2);
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));
  EXPECT_FALSE(TokenShard::is_current(path, 0xABCDEF, 1234, 4096));
}

TEST(TokenShards, DamagedFilesAreRefused) {
  TempDir dir;
  const std::string path = dir / "d.tok";
  {
    TokenShardWriter w(path, header());
    w.add_sentence({4, 5, 6}, 3);
    w.add_sentence({7}, 1);
    w.finish();
  }
  const std::string good = mtk::test::read_text(path);

  mtk::test::write_text(path, good.substr(0, good.size() - 8));
  std::string e = error_of([&] { TokenShard::open(path); });
  EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  EXPECT_NE(e.find(path), std::string::npos) << e;

  std::string bad = good;
  bad[0] = 'X';
  mtk::test::write_text(path, bad);
  e = error_of([&] { TokenShard::open(path); });
  EXPECT_NE(e.find("not a token shard"), std::string::npos) << e;

  bad = good;
  bad[40] ^= 1;  // num_tokens: the checksum catches it
  mtk::test::write_text(path, bad);
  e = error_of([&] { TokenShard::open(path); });
  EXPECT_NE(e.find("damaged header"), std::string::npos) << e;

  mtk::test::write_text(path, "short");
  EXPECT_THROW(TokenShard::open(path), mtk::Error);
  EXPECT_THROW(TokenShard::open(dir / "missing.tok"), mtk::Error);
}

TEST(TokenShards, IsCurrentChecksVocabularySourceAndLimit) {
  TempDir dir;
  const std::string path = dir / "c.tok";
  {
    TokenShardWriter w(path, header());
    w.add_sentence({4}, 1);
    w.finish();
  }
  std::string why;
  EXPECT_TRUE(TokenShard::is_current(path, 0xABCDEF, 1234, 4096, &why));
  EXPECT_FALSE(TokenShard::is_current(path, 0xABCDEE, 1234, 4096, &why));
  EXPECT_EQ(why, "made with another vocabulary");
  EXPECT_FALSE(TokenShard::is_current(path, 0xABCDEF, 1235, 4096, &why));
  EXPECT_NE(why.find("1234 bytes"), std::string::npos) << why;
  EXPECT_FALSE(TokenShard::is_current(path, 0xABCDEF, 1234, 100, &why));
}

}  // namespace
