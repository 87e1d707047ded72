// SPDX-License-Identifier: Apache-2.0
// A corpus of one's own (docs/lm1b.md, docs/wmt.md): file patterns, JSON Lines, the held-out split,
// joined token shards, TSV and two-file pairs, and the progress line of long phases.
#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/pair_reader.hpp>
#include <mtk/data/progress_line.hpp>
#include <mtk/data/text_corpus.hpp>
#include <mtk/data/token_shards.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "lm_data_test_util.hpp"
#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace {

namespace fs = std::filesystem;
using mtk::test::contains;
using mtk::test::error_of;
using mtk::test::TempDir;
using mtk::test::write_text;

TEST(ProgressLine, AmountRateAndTimeLeft) {
  EXPECT_EQ(mtk::format_amount_rate_eta(12.0 * (1 << 20), 48.0 * (1 << 20), "bytes", 4),
            "12.00 MiB/48.00 MiB (25.0%), 3.00 MiB/s, ETA 12s");
  EXPECT_EQ(mtk::format_amount_rate_eta(1200, 4800, "sentences", 4),
            "1.20k/4.80k sentences (25.0%), 300 sentences/s, ETA 12s");
  EXPECT_EQ(mtk::format_amount_rate_eta(1200, 0, "pairs", 0), "1.20k pairs");
  EXPECT_EQ(mtk::format_amount_rate_eta(4800, 4800, "pairs", 2),
            "4.80k/4.80k pairs (100.0%), 2.40k pairs/s");
}

// In a log a whole line per interval; on a terminal the line is redrawn in place.
TEST(ProgressLine, LogLinesAndTerminalRedraws) {
  for (const int terminal : {0, 1}) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    {
      mtk::ProgressLineOptions o;
      o.out = f;
      o.terminal = terminal;
      o.terminal_interval_s = o.log_interval_s = 0;
      mtk::ProgressLine p("encode", 100, "pairs", o);
      p.update(50, "half");
      p.finish("done");
    }
    std::rewind(f);
    std::string text;
    for (int c; (c = std::fgetc(f)) != EOF;)
      text += static_cast<char>(c);
    std::fclose(f);
    EXPECT_TRUE(contains(text, "encode: 50/100 pairs (50.0%)")) << text;
    EXPECT_TRUE(contains(text, ", half")) << text;
    EXPECT_TRUE(contains(text, "encode: 50 pairs in ")) << text;  // the finish line
    EXPECT_EQ(contains(text, "\r"), terminal == 1) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), terminal ? 1 : 2) << text;
  }
  mtk::ProgressLine p("x", 1, "bytes", {false, stdout, 0});  // silent: another rank
  p.update(1);
  p.finish();
}

TEST(FilePatterns, GlobsSortedNamesKeptErrorsNamed) {
  TempDir dir;
  for (const char* name : {"b.txt", "a.txt", "c.gz", "sub/d.txt"})
    write_text(dir / name, "x\n");
  const auto files = mtk::expand_file_patterns({dir / "*.txt", dir / "c.gz"}, "--text");
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0], dir / "a.txt");
  EXPECT_EQ(files[1], dir / "b.txt");
  EXPECT_EQ(files[2], dir / "c.gz");
  EXPECT_TRUE(contains(error_of([&] { mtk::expand_file_patterns({dir / "*.json"}, "--text"); }),
                       "--text '" + dir / "*.json" + "' matches no file"));
  EXPECT_TRUE(contains(error_of([&] { mtk::expand_file_patterns({dir / "no.txt"}, "--text"); }),
                       "does not exist"));
  EXPECT_TRUE(contains(error_of([&] { mtk::expand_file_patterns({dir / "sub"}, "--text"); }),
                       "is a folder: give its files"));
  EXPECT_TRUE(contains(error_of([&] {
                         mtk::expand_file_patterns({dir / "*.txt", dir / "a.txt"}, "--text");
                       }),
                       "is named twice"));
}

TEST(HeldoutSplit, AboutTheFractionAndTheSameEveryTime) {
  const mtk::HeldoutSplit split{0.1, 7};
  int held = 0;
  for (std::size_t f = 0; f < 4; ++f)
    for (std::int64_t line = 1; line <= 5000; ++line) {
      held += split.held_out(f, line) ? 1 : 0;
      ASSERT_EQ(split.held_out(f, line), (mtk::HeldoutSplit{0.1, 7}.held_out(f, line)));
    }
  EXPECT_NEAR(held / 20000.0, 0.1, 0.01);
  EXPECT_FALSE((mtk::HeldoutSplit{0, 7}.held_out(0, 1)));
  int differ = 0;
  for (std::int64_t line = 1; line <= 1000; ++line)
    differ += split.held_out(0, line) != mtk::HeldoutSplit{0.1, 8}.held_out(0, line) ? 1 : 0;
  EXPECT_GT(differ, 50);  // another seed, another split
}

TEST(JsonLines, TheNamedFieldIsTheText) {
  TempDir dir;
  write_text(dir / "a.jsonl",
             "{\"id\": 1, \"text\": \"one two\"}\n"
             "{\"text\": \"three\\nfour\\tfive\"}\n"
             "{\"text\": null}\n"
             "{\"text\": \"nul \\u0000 here\"}\n"
             "{\"text\": \"caf\\u00e9\"}\n");
  mtk::LineReaderOptions o;
  o.json_text_field = "text";
  mtk::LineReader reader(dir / "a.jsonl", o);
  std::vector<std::string> lines;
  for (std::string line; reader.next(line);)
    lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "one two");
  EXPECT_EQ(lines[1], "three four five");
  EXPECT_EQ(lines[2], "caf\xC3\xA9");
  EXPECT_EQ(reader.stats().empty, 1);
  EXPECT_EQ(reader.stats().invalid_utf8, 1);
  EXPECT_EQ(reader.stats().words, 2 + 3 + 1);

  write_text(dir / "b.jsonl", "{\"text\": \"ok\"}\n{\"body\": \"x\", \"id\": 2}\n");
  EXPECT_TRUE(contains(error_of([&] {
                         mtk::LineReader r(dir / "b.jsonl", o);
                         for (std::string line; r.next(line);) {
                         }
                       }),
                       "b.jsonl:2: no field \"text\" (the object has body, id)"));
  write_text(dir / "c.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n[1]\n");
  EXPECT_TRUE(contains(error_of([&] {
                         mtk::LineReader r(dir / "c.jsonl", o);
                         for (std::string line; r.next(line);) {
                         }
                       }),
                       "c.jsonl:2: field \"text\" is a number, not a string"));
  write_text(dir / "d.jsonl", "{\"text\": \"ok\"}\n{\"text\": \"cut\n");
  EXPECT_TRUE(contains(error_of([&] {
                         mtk::LineReader r(dir / "d.jsonl", o);
                         for (std::string line; r.next(line);) {
                         }
                       }),
                       "d.jsonl:2: not a JSON object"));
}

mtk::TokenShardInfo test_info(std::uint64_t fingerprint) {
  mtk::TokenShardInfo info;
  info.vocab_size = 50;
  info.eos_id = 1;
  info.vocab_fingerprint = fingerprint;
  return info;
}

TEST(ConcatenateTokenShards, PiecesInOrderWithTheirCounts) {
  TempDir dir;
  {
    mtk::TokenShardWriter a(dir / "a.tok", test_info(9));
    a.add_sentence(std::vector<std::int32_t>{2, 3}, 2);
    a.add_sentence(std::vector<std::int32_t>{4}, 1);
    a.finish();
    mtk::TokenShardWriter b(dir / "b.tok", test_info(9));
    b.finish();  // an empty piece
    mtk::TokenShardWriter c(dir / "c.tok", test_info(9));
    c.add_sentence(std::vector<std::int32_t>{5, 6, 7}, 3);
    c.finish();
  }
  const auto info =
      mtk::concatenate_token_shards({dir / "a.tok", dir / "b.tok", dir / "c.tok"}, dir / "j.tok");
  EXPECT_EQ(info.num_sentences, 3);
  EXPECT_EQ(info.num_words, 6);
  const auto joined = mtk::TokenShard::open(dir / "j.tok");
  EXPECT_EQ(joined.sentence(0), (std::vector<std::int32_t>{2, 3, 1}));
  EXPECT_EQ(joined.sentence(1), (std::vector<std::int32_t>{4, 1}));
  EXPECT_EQ(joined.sentence(2), (std::vector<std::int32_t>{5, 6, 7, 1}));
  {
    mtk::TokenShardWriter d(dir / "d.tok", test_info(10));
    d.finish();
  }
  EXPECT_TRUE(
      contains(error_of([&] {
                 mtk::concatenate_token_shards({dir / "a.tok", dir / "d.tok"}, dir / "k.tok");
               }),
               "was encoded with another vocabulary"));
  EXPECT_FALSE(fs::exists(dir / "k.tok"));
}

std::vector<std::string> read_pairs(const mtk::wmt::PairSource& s, std::size_t limit,
                                    int* malformed_count = nullptr) {
  mtk::wmt::PairReader reader(s, limit);
  std::vector<std::string> out;
  mtk::text::RawLine a, b;
  bool malformed = false;
  while (reader.next(a, b, malformed)) {
    if (malformed && malformed_count)
      ++*malformed_count;
    out.push_back(
        malformed ? "?"
                  : mtk::cat(a.text, a.overlong ? "+" : "", "|", b.text, b.overlong ? "+" : ""));
  }
  return out;
}

TEST(PairReader, TsvTwoFilesAndPrefixes) {
  using Kind = mtk::wmt::PairSource::Kind;
  TempDir dir;
  write_text(dir / "p.tsv", "a b\tc d\nno tab\nx\ty\tz\nlonger one\tw\n");
  write_text(dir / "s.txt", "one\ntwo\n");
  write_text(dir / "t.txt", "un\ndeux\n");
  write_text(dir / "c.en", "hello\n");
  write_text(dir / "c.fr", "bonjour\n");
  const auto tsv = mtk::wmt::resolve_pair_source(dir / "p.tsv", "en", "fr", "data.train");
  EXPECT_EQ(tsv.kind, Kind::tsv);
  int malformed = 0;
  EXPECT_EQ(read_pairs(tsv, 6, &malformed),
            (std::vector<std::string>{"a b|c d", "?", "?", "longer+|w"}));
  EXPECT_EQ(malformed, 2);
  const auto files =
      mtk::wmt::resolve_pair_source(dir / "s.txt" + " | " + dir / "t.txt", "en", "fr", "x");
  EXPECT_EQ(files.kind, Kind::files);
  EXPECT_EQ(read_pairs(files, 100), (std::vector<std::string>{"one|un", "two|deux"}));
  const auto prefix = mtk::wmt::resolve_pair_source(dir / "c", "en", "fr", "x");
  EXPECT_EQ(prefix.kind, Kind::prefix);
  EXPECT_EQ(prefix.target_path, dir / "c.fr");
  EXPECT_EQ(read_pairs(prefix, 100), (std::vector<std::string>{"hello|bonjour"}));
  EXPECT_TRUE(contains(error_of([&] {
                         mtk::wmt::resolve_pair_source(dir / "s.txt|" + dir / "no", "en", "fr",
                                                       "data.train");
                       }),
                       "data.train: '" + dir / "no" + "'"));
  write_text(dir / "u.txt", "uno\n");
  EXPECT_TRUE(contains(error_of([&] {
                         read_pairs(mtk::wmt::resolve_pair_source(dir / "s.txt|" + dir / "u.txt",
                                                                  "en", "fr", "x"),
                                    100);
                       }),
                       "has 2 lines but"));
}

}  // namespace
