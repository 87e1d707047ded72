// newstest .sgm reading: segments in order, whitespace collapsed, entities kept or decoded, and
// malformed files named with their line.
#include <mtk/base/error.hpp>
#include <mtk/text/sgm.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <sys/resource.h>

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "mtk_sgm_" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Sgm, ReadsSegmentsInOrder) {
  const std::string path =
      write_temp("ok.sgm",
                 "<srcset setid=\"newstest2014\" srclang=\"any\">\n"
                 "<doc sysid=\"ref\" docid=\"1\" genre=\"news\" origlang=\"en\">\n<p>\n"
                 "<seg id=\"1\">  Hello,   world!  </seg>\n"
                 "<seg id=\"2\">Tom &amp; Jerry &quot;said&quot; &#233;t&#xE9;</seg>\n"
                 "</p>\n</doc>\n</srcset>\n");
  const auto raw = mtk::text::read_sgm_segments(path, false);
  ASSERT_EQ(raw.size(), 2u);
  EXPECT_EQ(raw[0], "Hello, world!");
  EXPECT_EQ(raw[1], "Tom &amp; Jerry &quot;said&quot; &#233;t&#xE9;");
  const auto text = mtk::text::read_sgm_segments(path, true);
  EXPECT_EQ(text[1], "Tom & Jerry \"said\" été");
  EXPECT_EQ(mtk::text::read_text_lines(path, true), text);
}

TEST(Sgm, MalformedSegmentNamesTheLine) {
  const std::string path =
      write_temp("bad.sgm", "<doc>\n<seg id=\"1\">ok</seg>\n<seg id=\"2\">open\n");
  try {
    mtk::text::read_sgm_segments(path, false);
    FAIL() << "no error";
  } catch (const mtk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.sgm:3"), std::string::npos) << e.what();
  }
}

TEST(Sgm, NoSegmentsOrMissingFileIsAnError) {
  EXPECT_THROW(mtk::text::read_sgm_segments(write_temp("none.sgm", "plain text\n"), false),
               mtk::Error);
  EXPECT_THROW(mtk::text::read_text_lines("/nonexistent/x.txt"), mtk::Error);
}

TEST(Sgm, PlainTextLinesKeepEmptyLines) {
  const std::string path = write_temp("plain.txt", "a\r\n\nb c\n");
  EXPECT_EQ(mtk::text::read_text_lines(path), (std::vector<std::string>{"a", "", "b c"}));
}

long peak_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// `before`, then a line of `huge` bytes of 'x' (written in pieces: the test stays small), then
// `after`.
std::string write_huge(const std::string& name, const std::string& before, std::size_t huge,
                       const std::string& after) {
  const std::string path = ::testing::TempDir() + "mtk_sgm_" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  std::fwrite(before.data(), 1, before.size(), f);
  const std::string chunk(std::size_t{1} << 20, 'x');
  for (std::size_t done = 0; done < huge; done += chunk.size())
    std::fwrite(chunk.data(), 1, std::min(chunk.size(), huge - done), f);
  std::fwrite(after.data(), 1, after.size(), f);
  std::fclose(f);
  return path;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const mtk::Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Issue 64 item 6: dev/test sets and translate's --input were read whole (a 258 MiB <seg> peaked
// at 2.69 GB before its error). Now they are streamed: a 200 MiB segment (in a .sgm file and as a
// plain line) is refused with an error naming the file, the line and the limit, while the peak
// memory grows by far less than the line.
TEST(Sgm, AHugeSegmentIsRefusedInBoundedMemory) {
  constexpr std::size_t kHuge = std::size_t{200} << 20;
  const std::string sgm =
      write_huge("huge.sgm", "<doc docid=\"1\">\n<seg id=\"1\">short</seg>\n<seg id=\"2\">", kHuge,
                 "</seg>\n<seg id=\"3\">after</seg>\n</doc>\n");
  const std::string plain = write_huge("huge.txt", "short\n", kHuge, "\nafter\n");
  const long before = peak_rss_kib();
  std::string e = error_of([&] { mtk::text::read_text_lines(sgm, true); });
  EXPECT_NE(e.find(sgm + ":3: a line longer than the limit of 1048576 bytes; it is refused"),
            std::string::npos)
      << e;
  e = error_of([&] { mtk::text::read_sgm_segments(sgm, false, 1024, "data.max_line_bytes"); });
  EXPECT_NE(e.find(sgm + ":3: a line longer than the limit of 1024 bytes (data.max_line_bytes)"),
            std::string::npos)
      << e;
  e = error_of([&] { mtk::text::read_text_lines(plain, false, 1024, "data.max_line_bytes"); });
  EXPECT_NE(e.find(plain + ":2: a line longer than the limit of 1024 bytes (data.max_line_bytes)"),
            std::string::npos)
      << e;
  EXPECT_LT(peak_rss_kib() - before, 32 * 1024) << "KiB of peak memory while reading";
  std::remove(sgm.c_str());
  std::remove(plain.c_str());
}

// The limit counts a segment's text, not its markup; a line of exactly the limit is accepted.
TEST(Sgm, TheLimitIsTheSegmentsTextAndInclusive) {
  const std::string text(1000, 'a');
  const std::string path = write_temp("limit.sgm", "<seg id=\"1\">" + text + "</seg>\n");
  EXPECT_EQ(mtk::text::read_sgm_segments(path, false, 1000), std::vector<std::string>{text});
  EXPECT_NE(error_of([&] {
              mtk::text::read_sgm_segments(path, false, 999);
            }).find("limit.sgm:1: a line longer than the limit of 999 bytes"),
            std::string::npos);
  const std::string plain = write_temp("limit.txt", text + "\r\n" + text + "\n");
  EXPECT_EQ(mtk::text::read_text_lines(plain, false, 1000), (std::vector<std::string>{text, text}));
}

}  // namespace
