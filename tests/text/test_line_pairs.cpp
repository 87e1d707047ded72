// Every corpus line is a whole line: text::LineStream / LinePairs (mtk-wmt) and LineReader
// (mtk-lm1b) on NUL bytes, CR/LF mixes, a missing final newline, gzip, and a 100 MiB line read in
// bounded memory; a pair is only ever formed from the two lines with the same number.
#include <mtk/base/error.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/text/line_pairs.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <sys/resource.h>
#include <zlib.h>

namespace {

using mtk::text::LinePairs;
using mtk::text::LineStream;
using mtk::text::RawLine;

constexpr int kLines = 3000;
constexpr int kNulSource = 100, kNulTarget = 200, kHuge = 50;
constexpr std::size_t kHugeBytes = std::size_t{100} << 20;

std::string temp(const std::string& name) {
  return ::testing::TempDir() + "mtk_line_pairs_" + name;
}

// Line n (1-based) of one side: "<tag><n> words", with a NUL at kNul, CRLF on every third line,
// a lone CR inside every seventh, and no newline after the last line. kHuge (if huge) is 100 MiB,
// written in pieces so the test itself stays small in memory.
void write_corpus(const std::string& path, char tag, int nul_line, bool huge, bool gzip) {
  gzFile gz = gzip ? gzopen(path.c_str(), "wb1") : nullptr;
  std::FILE* f = gzip ? nullptr : std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(gz || f) << path;
  auto put = [&](const std::string& s) {
    if (gz)
      gzwrite(gz, s.data(), static_cast<unsigned>(s.size()));
    else
      std::fwrite(s.data(), 1, s.size(), f);
  };
  for (int n = 1; n <= kLines; ++n) {
    std::string line = std::string(1, tag) + std::to_string(n) + " words";
    if (n == nul_line)
      line += std::string(" before\0after", 13);
    if (n % 7 == 0)
      line += " cr\rinside";
    if (huge && n == kHuge) {
      put(line);
      const std::string chunk(std::size_t{1} << 20, 'x');
      for (std::size_t i = 0; i < kHugeBytes / chunk.size(); ++i)
        put(chunk);
      line.clear();
    }
    put(line + (n == kLines ? "" : n % 3 == 0 ? "\r\n" : "\n"));
  }
  if (gz)
    gzclose(gz);
  else
    std::fclose(f);
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

std::string number_of(const std::string& text) {
  std::size_t i = 1;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9')
    ++i;
  return text.substr(1, i - 1);
}

TEST(LinePairs, EveryPairIsTheSameLineOfBothFilesWhateverTheBytes) {
  const std::string src = temp("src.en"), tgt = temp("tgt.fr.gz");
  write_corpus(src, 's', kNulSource, true, false);
  write_corpus(tgt, 't', kNulTarget, false, true);
  const long rss_before = peak_rss_kib();
  LinePairs pairs(src, tgt, 1024);
  RawLine a, b;
  int n = 0;
  while (pairs.next(a, b)) {
    ++n;
    ASSERT_EQ(pairs.line_number(), n);
    const std::string want = std::to_string(n);
    EXPECT_EQ(a.overlong, n == kHuge) << n;
    ASSERT_EQ(number_of(a.text), want) << "source line " << n;
    ASSERT_EQ(number_of(b.text), want) << "target line " << n;
    EXPECT_LE(a.text.size(), 1024u);
    EXPECT_EQ(a.text.find('\0') != std::string::npos, n == kNulSource) << n;
    EXPECT_EQ(b.text.find('\0') != std::string::npos, n == kNulTarget) << n;
    if (n != kHuge) {
      EXPECT_NE(a.text.back(), '\r') << "CR before the newline kept, line " << n;
      EXPECT_EQ(a.text.find("\rinside") != std::string::npos, n % 7 == 0) << n;
    }
  }
  EXPECT_EQ(n, kLines);
  // The 100 MiB line was streamed, not held: far less than its size was ever resident.
  EXPECT_LT(peak_rss_kib() - rss_before, 32 * 1024) << "KiB of peak memory while reading";
  std::remove(src.c_str());
  std::remove(tgt.c_str());
}

TEST(LinePairs, FilesOfDifferentLengthNameBothCounts) {
  const std::string src = temp("long.en"), tgt = temp("short.fr");
  write_corpus(src, 's', kNulSource, false, false);
  {
    std::ofstream out(tgt, std::ios::binary);
    for (int n = 1; n < kLines; ++n)  // one line fewer, the NUL line included
      out << 't' << n << (n == kNulTarget ? std::string(" a\0b", 4) : "") << " mot\n";
  }
  LinePairs pairs(src, tgt, 1024);
  RawLine a, b;
  try {
    while (pairs.next(a, b)) {
    }
    ADD_FAILURE() << "misaligned files were accepted";
  } catch (const mtk::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("has 3000 lines but"), std::string::npos) << what;
    EXPECT_NE(what.find("has 2999"), std::string::npos) << what;
  }
  std::remove(src.c_str());
  std::remove(tgt.c_str());
}

TEST(LineStream, EmptyFileAndTrailingNewlines) {
  const std::string path = temp("few");
  std::ofstream(path, std::ios::binary) << "a\r\n\nb\n";
  LineStream lines(path, 8);
  RawLine l;
  ASSERT_TRUE(lines.next(l));
  EXPECT_EQ(l.text, "a");
  ASSERT_TRUE(lines.next(l));
  EXPECT_EQ(l.text, "");
  ASSERT_TRUE(lines.next(l));
  EXPECT_EQ(l.text, "b");
  EXPECT_FALSE(lines.next(l));
  EXPECT_EQ(lines.line_number(), 3);
  // Exactly `keep` bytes then CRLF: not over the limit.
  std::ofstream(path, std::ios::binary) << "12345678\r\n123456789\n";
  LineStream exact(path, 8);
  ASSERT_TRUE(exact.next(l));
  EXPECT_EQ(l.text, "12345678");
  EXPECT_FALSE(l.overlong);
  ASSERT_TRUE(exact.next(l));
  EXPECT_TRUE(l.overlong);
  EXPECT_EQ(l.text, "12345678");
  std::remove(path.c_str());
}

// mtk-lm1b's reader over the same bytes: the NUL line and the huge line are skipped and counted,
// every other line comes back whole with its own line number.
TEST(LineReader, NulBytesAndHugeLinesAreSkippedAndCountedInBoundedMemory) {
  const std::string path = temp("lm1b.en");
  write_corpus(path, 's', kNulSource, true, false);
  const long rss_before = peak_rss_kib();
  mtk::LineReaderOptions o;
  o.max_line_bytes = 1024;
  mtk::LineReader reader(path, o);
  std::string line;
  int kept = 0;
  while (reader.next(line)) {
    ++kept;
    ASSERT_EQ(number_of(line), std::to_string(reader.line_number()));
  }
  EXPECT_EQ(kept, kLines - 2);
  EXPECT_EQ(reader.stats().lines, kLines);
  EXPECT_EQ(reader.stats().invalid_utf8, 1);
  EXPECT_EQ(reader.stats().too_long, 1);
  EXPECT_LT(peak_rss_kib() - rss_before, 32 * 1024) << "KiB of peak memory while reading";
  std::remove(path.c_str());
}

}  // namespace
