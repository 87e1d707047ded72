// Token shards: write / read round trip, header checks, damaged and unfinished files.
#include <mtk/base/error.hpp>
#include <mtk/data/impl/shard_checksums.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/token_shards.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "lm_data_test_util.hpp"
#include <cstring>
#include <filesystem>
#include <functional>
#include <unistd.h>

namespace {

using mtk::test::error_of;

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
  EXPECT_EQ(fs::file_size(path), 128u + 48u + 32u + 16u);  // + 1 block checksum + offsets'
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

// Rewrites the header's u32 at `at` and its checksum (bytes 120..127, XXH3-64 as written now) so
// that only the field changes.
std::string with_header_u32(std::string file, std::size_t at, std::uint32_t value) {
  std::memcpy(&file[at], &value, 4);
  const std::uint64_t h = mtk::shard_checksums::xxh3_64(file.data(), 120);
  std::memcpy(&file[120], &h, 8);
  return file;
}

// One token changed to another valid id (issue 15, item 9): the block's checksum finds it when
// it is read, and the error names the file, the tokens and their byte offsets. Blocks not read
// are not checked; the offsets are checked at open.
TEST(TokenShards, ChangedTokenIsFoundWithFileAndOffset) {
  TempDir dir;
  const std::string path = dir / "t.tok";
  {
    TokenShardWriter w(path, header());
    std::vector<std::int32_t> ids(999);
    for (int s = 0; s < 10; ++s) {  // 10 sentences of 1000 tokens: blocks 0, 1, 2
      for (std::size_t i = 0; i < ids.size(); ++i)
        ids[i] = 2 + static_cast<std::int32_t>((i * 7 + s) % 90);
      w.add_sentence(ids, 999);
    }
    w.finish();
  }
  const std::string good = mtk::test::read_text(path);
  std::string bad = good;
  const std::size_t at = 128 + 4 * 5000;  // token 5000, in block 1 (tokens 4096..8191)
  std::int32_t id = 0;
  std::memcpy(&id, &bad[at], 4);
  id = id == 7 ? 8 : 7;
  std::memcpy(&bad[at], &id, 4);
  mtk::test::write_text(path, bad);
  const TokenShard shard = TokenShard::open(path);
  EXPECT_NO_THROW(shard.tokens(0, 4096));
  EXPECT_NO_THROW(shard.tokens(8192, 10000 - 8192));
  EXPECT_NO_THROW(shard.sentence(3));  // tokens 3000..3999
  for (const auto& read : std::vector<std::function<void()>>{
           [&] { shard.tokens(4990, 20); }, [&] { shard.sentence(5); }, [&] { shard.tokens(); }}) {
    const std::string e = error_of(read);
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_NE(e.find("tokens 4096..8191"), std::string::npos) << e;
    EXPECT_NE(e.find("bytes 16512..32895"), std::string::npos) << e;
    EXPECT_NE(e.find("checksum"), std::string::npos) << e;
    EXPECT_NE(e.find("mtk-lm1b prepare"), std::string::npos) << e;
  }
  // A changed sentence offset is found at open.
  bad = good;
  bad[128 + 4 * 10000 + 8 * 5] ^= 1;
  mtk::test::write_text(path, bad);
  const std::string e = error_of([&] { TokenShard::open(path); });
  EXPECT_NE(e.find("sentence offsets"), std::string::npos) << e;
  EXPECT_NE(e.find(path), std::string::npos) << e;
}

// Shards of format version 1 (no checksums) are refused with what to do; prepare re-encodes them
// because is_current() says no.
TEST(TokenShards, OldFormatIsRefusedWithWhatToDo) {
  TempDir dir;
  const std::string path = dir / "old.tok";
  {
    TokenShardWriter w(path, header());
    w.add_sentence({4, 5}, 2);
    w.finish();
  }
  mtk::test::write_text(path, with_header_u32(mtk::test::read_text(path), 8, 1));
  const std::string e = error_of([&] { TokenShard::open(path); });
  EXPECT_NE(e.find("format version 1"), std::string::npos) << e;
  EXPECT_NE(e.find("run `mtk-lm1b prepare` again"), std::string::npos) << e;
  std::string why;
  EXPECT_FALSE(TokenShard::is_current(path, 0xABCDEF, 1234, 4096, &why));
  EXPECT_NE(why.find("format version 1"), std::string::npos) << why;
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

// New shards are format version 3 with XXH3-64 checksums, recorded in the header (bytes 8 and 14).
TEST(TokenShards, WritesVersion3WithXxh3Checksums) {
  TempDir dir;
  const std::string path = dir / "x.tok";
  {
    TokenShardWriter w(path, header());
    w.add_sentence({4, 5, 6}, 3);
    w.finish();
  }
  const std::string file = mtk::test::read_text(path);
  std::uint32_t version = 0;
  std::uint16_t header_bytes = 0, kind = 0;
  std::memcpy(&version, &file[8], 4);
  std::memcpy(&header_bytes, &file[12], 2);
  std::memcpy(&kind, &file[14], 2);
  EXPECT_EQ(version, 3u);
  EXPECT_EQ(header_bytes, 128u);
  EXPECT_EQ(kind, 1u);
  std::uint64_t sum = 0;
  std::memcpy(&sum, &file[120], 8);
  EXPECT_EQ(sum, mtk::shard_checksums::xxh3_64(file.data(), 120));
  // The one token block (4 tokens) and the offsets {0, 4}, each by XXH3-64 of its bytes.
  std::uint64_t block = 0, offsets = 0;
  std::memcpy(&block, &file[128 + 16 + 16], 8);
  std::memcpy(&offsets, &file[128 + 16 + 16 + 8], 8);
  EXPECT_EQ(block, mtk::shard_checksums::xxh3_64(&file[128], 16));
  EXPECT_EQ(offsets, mtk::shard_checksums::xxh3_64(&file[128 + 16], 16));
  EXPECT_EQ(TokenShard::open(path).info().checksum, mtk::TokenShardChecksum::xxh3_64);
  EXPECT_STREQ(mtk::token_shard_checksum_name(TokenShard::read_info(path).checksum), "xxh3-64");
}

// A shard written by MTK before XXH3 (format version 2, its own checksums; the fixture was written
// by TokenShardWriter at main 0342310) still opens, reads and verifies, and a damaged one is still
// found. 3 sentences: 4099 tokens, 2 tokens, none (each with its end-of-sentence id 1).
const std::string kVersion2Shard = std::string(MTK_TEST_FIXTURES) + "/token-shard-v2.tok";

TEST(TokenShards, Version2ShardsAreStillReadAndVerified) {
  const TokenShard shard = TokenShard::open(kVersion2Shard);
  const TokenShardInfo& info = shard.info();
  EXPECT_EQ(info.checksum, mtk::TokenShardChecksum::legacy);
  EXPECT_EQ(info.num_sentences, 3);
  EXPECT_EQ(info.num_tokens, 4104);
  EXPECT_EQ(info.vocab_fingerprint, 0xABCDEFu);
  EXPECT_EQ(info.source_lines, 4);
  EXPECT_EQ(info.skipped(), 1);
  EXPECT_NO_THROW(shard.tokens());  // both token blocks match their version-2 checksums
  const auto first = shard.sentence(0);
  ASSERT_EQ(first.size(), 4100u);
  for (int i = 0; i < 4099; ++i)
    ASSERT_EQ(first[static_cast<std::size_t>(i)], 2 + (i * 7) % 97) << i;
  EXPECT_EQ(shard.sentence(1), (std::vector<std::int32_t>{5, 6, 1}));
  EXPECT_EQ(shard.sentence(2), (std::vector<std::int32_t>{1}));
  std::string why;
  EXPECT_TRUE(TokenShard::is_current(kVersion2Shard, 0xABCDEF, 1234, 4096, &why)) << why;

  // One token of the second block changed to another valid id: found by its version-2 checksum.
  TempDir dir;
  const std::string path = dir / "v2.tok";
  std::string bad = mtk::test::read_text(kVersion2Shard);
  const std::size_t at = 128 + 4 * 4097;
  bad[at] = static_cast<char>(bad[at] == 7 ? 8 : 7);
  mtk::test::write_text(path, bad);
  const TokenShard damaged = TokenShard::open(path);
  EXPECT_NO_THROW(damaged.tokens(0, 4096));
  const std::string e = error_of([&] { damaged.tokens(4096, 8); });
  EXPECT_NE(e.find("tokens 4096..4103"), std::string::npos) << e;
  EXPECT_NE(e.find("checksum"), std::string::npos) << e;
  EXPECT_FALSE(TokenShard::is_current(path, 0xABCDEF, 1234, 4096));

  // A version-2 header claiming XXH3 (or a version-3 one claiming the legacy hash) is damage.
  std::string relabelled = mtk::test::read_text(kVersion2Shard);
  relabelled[14] = 1;
  mtk::test::write_text(path, relabelled);
  const std::string h = error_of([&] { TokenShard::open(path); });
  EXPECT_NE(h.find("damaged header"), std::string::npos) << h;
}

}  // namespace
