// Token shards: write / read round trip, header checks, damaged and unfinished files.
#include <mtk/base/error.hpp>
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

std::uint64_t fnv1a64(const std::string& bytes, std::size_t n) {
  std::uint64_t h = 14695981039346656037ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// Rewrites the header's u32 at `at` and its checksum (bytes 120..127) so that only the field
// changes.
std::string with_header_u32(std::string file, std::size_t at, std::uint32_t value) {
  std::memcpy(&file[at], &value, 4);
  const std::uint64_t h = fnv1a64(file, 120);
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

}  // namespace
