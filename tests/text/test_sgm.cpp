// newstest .sgm reading: segments in order, whitespace collapsed, entities kept or decoded, and
// malformed files named with their line.
#include <mtk/base/error.hpp>
#include <mtk/text/sgm.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

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

}  // namespace
