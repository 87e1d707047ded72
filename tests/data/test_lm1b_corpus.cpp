// LM1B layout discovery and the validating line reader: missing folders and shards, empty shards,
// invalid UTF-8, overlong and empty lines (counted and reported, or errors in strict mode).
#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "lm_data_test_util.hpp"
#include <filesystem>

namespace {

using mtk::test::contains;
using mtk::test::error_of;

namespace fs = std::filesystem;
using mtk::LineReader;
using mtk::LineReaderOptions;
using mtk::test::TempDir;
using mtk::test::write_text;

std::vector<std::string> read_all(LineReader& r) {
  std::vector<std::string> lines;
  std::string line;
  while (r.next(line))
    lines.push_back(line);
  return lines;
}

TEST(Utf8, Validation) {
  auto bad = [](const std::string& s) { return mtk::find_invalid_utf8(s.data(), s.size()); };
  EXPECT_EQ(bad("plain ascii"), -1);
  EXPECT_EQ(bad("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), -1);  // é € 😀
  EXPECT_EQ(bad("ab\xFF"), 2);
  EXPECT_EQ(bad("\xC0\xAF"), 0);          // overlong '/'
  EXPECT_EQ(bad("x\xE0\x80\xAF"), 1);     // overlong 3-byte form
  EXPECT_EQ(bad("\xED\xA0\x80"), 0);      // surrogate
  EXPECT_EQ(bad("\xF4\x90\x80\x80"), 0);  // above U+10FFFF
  EXPECT_EQ(bad("abc\xE2\x82"), 3);       // truncated
  EXPECT_EQ(bad("\xE2\x28\xA1"), 0);      // bad continuation
  EXPECT_EQ(mtk::count_words("  it 's  a\tdog . ", 17), 5);
  EXPECT_EQ(mtk::count_words("   ", 3), 0);
}

TEST(LineReader, ReadsLinesAndCountsSkipped) {
  TempDir dir;
  const std::string path = dir / "shard";
  const std::string long_line(300, 'x');
  write_text(path,
             "first line\r\nsecond \xFF line\n\n   \n" + long_line + "\nlast line no newline");
  LineReaderOptions o;
  o.max_line_bytes = 100;
  LineReader r(path, o);
  EXPECT_EQ(read_all(r), (std::vector<std::string>{"first line", "last line no newline"}));
  const auto& s = r.stats();
  EXPECT_EQ(s.lines, 6);
  EXPECT_EQ(s.valid, 2);
  EXPECT_EQ(s.words, 6);
  EXPECT_EQ(s.invalid_utf8, 1);
  EXPECT_EQ(s.empty, 2);
  EXPECT_EQ(s.too_long, 1);
  EXPECT_EQ(s.skipped(), 4);
  ASSERT_EQ(s.examples.size(), 4u);
  EXPECT_TRUE(contains(s.examples[0], path + ":2: invalid UTF-8 at byte 8 (0xFF)"))
      << s.examples[0];
  EXPECT_TRUE(contains(s.examples[1], path + ":3: empty line")) << s.examples[1];
  EXPECT_TRUE(contains(s.examples[3], path + ":5: line longer than 100 bytes")) << s.examples[3];
  EXPECT_EQ(s.skipped_summary(), "4 skipped (2 empty, 1 invalid UTF-8, 1 longer than the limit)");
}

TEST(LineReader, LimitIsInclusiveAndHugeLinesStayBounded) {
  TempDir dir;
  const std::string path = dir / "shard";
  const std::string at_limit(64, 'a');
  const std::string huge(3 << 20, 'b');  // larger than the read buffer
  write_text(path, at_limit + "\r\n" + at_limit + "c\n" + huge + "\nafter huge\n");
  LineReaderOptions o;
  o.max_line_bytes = 64;
  LineReader r(path, o);
  EXPECT_EQ(read_all(r), (std::vector<std::string>{at_limit, "after huge"}));
  EXPECT_EQ(r.stats().too_long, 2);
  EXPECT_EQ(r.line_number(), 4);
}

TEST(LineReader, StrictModeNamesFileAndLine) {
  TempDir dir;
  const std::string path = dir / "news.en-00003-of-00100";
  write_text(path, "good line\nanother good line\nbad \xC3\x28 line\n");
  LineReaderOptions o;
  o.strict = true;
  LineReader r(path, o);
  std::string line;
  EXPECT_TRUE(r.next(line));
  EXPECT_TRUE(r.next(line));
  const std::string e = error_of([&] { r.next(line); });
  EXPECT_TRUE(contains(e, "mtk::LineReader")) << e;
  EXPECT_TRUE(contains(e, path + ":3: invalid UTF-8 at byte 5")) << e;
}

TEST(LineReader, EmptyAndMissingFiles) {
  TempDir dir;
  write_text(dir / "empty", "");
  std::string e = error_of([&] { LineReader r(dir / "empty"); });
  EXPECT_TRUE(contains(e, dir / "empty")) << e;
  EXPECT_TRUE(contains(e, "is empty (0 bytes)")) << e;

  e = error_of([&] { LineReader r(dir / "missing"); });
  EXPECT_TRUE(contains(e, dir / "missing")) << e;

  write_text(dir / "blank", "\n  \n\xFF\n");
  e = error_of([&] {
    LineReader r(dir / "blank");
    std::string line;
    while (r.next(line)) {
    }
  });
  EXPECT_TRUE(contains(e, "has no valid line (3 lines, 3 skipped (2 empty, 1 invalid UTF-8))"))
      << e;
}

TEST(Lm1bCorpus, FindsShardsInOrder) {
  TempDir dir;
  mtk::test::write_lm1b_corpus(dir.path(), 3, 5, 4);
  write_text(dir / "training-monolingual.tokenized.shuffled/README", "not a shard\n");
  const auto c = mtk::Lm1bCorpus::find(dir.path());
  ASSERT_EQ(c.training_shards.size(), 3u);
  EXPECT_EQ(c.training_numbers, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(fs::path(c.training_shards[2]).filename(), "news.en-00003-of-00100");
  EXPECT_EQ(fs::path(c.heldout_shard).filename(), "news.en.heldout-00000-of-00050");
  EXPECT_EQ(mtk::Lm1bCorpus::find(dir.path(), 2).training_shards.size(), 2u);
}

TEST(Lm1bCorpus, MissingFoldersAndShards) {
  TempDir dir;
  std::string e = error_of([&] { mtk::Lm1bCorpus::find(dir / "nope"); });
  EXPECT_TRUE(contains(e, "mtk::Lm1bCorpus::find: no folder '" + (dir / "nope"))) << e;

  fs::create_directories(dir / "c/training-monolingual.tokenized.shuffled");
  e = error_of([&] { mtk::Lm1bCorpus::find(dir / "c"); });
  EXPECT_TRUE(contains(e, "heldout-monolingual.tokenized.shuffled")) << e;

  fs::create_directories(dir / "c/heldout-monolingual.tokenized.shuffled");
  e = error_of([&] { mtk::Lm1bCorpus::find(dir / "c"); });
  EXPECT_TRUE(contains(e, "no training shard")) << e;

  mtk::test::write_lm1b_corpus(dir / "c", 4, 3, 3);
  fs::remove(dir / "c/training-monolingual.tokenized.shuffled/news.en-00003-of-00100");
  e = error_of([&] { mtk::Lm1bCorpus::find(dir / "c"); });
  EXPECT_TRUE(
      contains(e, "missing training shard '" + (dir / "c/training-monolingual.tokenized.shuffled/"
                                                      "news.en-00003-of-00100")))
      << e;

  mtk::test::write_lm1b_corpus(dir / "c", 4, 3, 3);
  e = error_of([&] { mtk::Lm1bCorpus::find(dir / "c", 99); });
  EXPECT_TRUE(contains(e, "news.en-00005-of-00100")) << e;
  EXPECT_TRUE(contains(e, "99 expected, found 4")) << e;

  fs::remove(dir / "c/heldout-monolingual.tokenized.shuffled/news.en.heldout-00000-of-00050");
  e = error_of([&] { mtk::Lm1bCorpus::find(dir / "c"); });
  EXPECT_TRUE(contains(e, "missing held-out shard")) << e;
}

TEST(Lm1bCorpus, SampleTakesTheFirstLinesOfEachShard) {
  TempDir dir;
  write_text(dir / "a", "a1\na2\na3\na4\n");
  write_text(dir / "b", "b1\n\xFF\nb2\n");
  mtk::LineStats stats;
  const auto lines = mtk::sample_lines({dir / "a", dir / "b"}, 4, {}, stats);
  EXPECT_EQ(lines, (std::vector<std::string>{"a1", "a2", "b1", "b2"}));
  EXPECT_EQ(stats.invalid_utf8, 1);
  ASSERT_EQ(stats.examples.size(), 1u);
  EXPECT_TRUE(contains(stats.examples[0], (dir / "b") + ":2:"));
}

TEST(Lm1bPrepared, ManifestRoundTripAndErrors) {
  TempDir dir;
  std::string e = error_of([&] { mtk::Lm1bPrepared::open(dir.path()); });
  EXPECT_TRUE(contains(e, "mtk-lm1b prepare")) << e;

  mtk::Lm1bPrepared p;
  p.dir = dir.path();
  p.vocab_model = mtk::Lm1bPrepared::vocab_path(dir.path());
  p.training_shards = {mtk::Lm1bPrepared::training_shard_path(dir.path(), 1),
                       mtk::Lm1bPrepared::training_shard_path(dir.path(), 2)};
  p.heldout_shard = mtk::Lm1bPrepared::heldout_shard_path(dir.path());
  for (const auto& f : {p.vocab_model, p.training_shards[0], p.training_shards[1], p.heldout_shard})
    write_text(f, "x");
  p.write_manifest();
  const auto q = mtk::Lm1bPrepared::open(dir.path());
  EXPECT_EQ(q.vocab_model, p.vocab_model);
  EXPECT_EQ(q.training_shards, p.training_shards);
  EXPECT_EQ(q.heldout_shard, p.heldout_shard);

  fs::remove(p.training_shards[1]);
  e = error_of([&] { mtk::Lm1bPrepared::open(dir.path()); });
  EXPECT_TRUE(contains(e, "manifest.txt:4: listed file")) << e;
}

}  // namespace
