// Sentence boundaries (mtk/text/sentences.hpp): where `mtk-wmt translate` cuts a long line.

#include <mtk/text/sentences.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

using mtk::text::split_sentences;
using V = std::vector<std::string>;

TEST(Sentences, SplitsAtEndsFollowedByASentenceStart) {
  EXPECT_EQ(split_sentences("The program stops. The Sub Main does not run!  Why? 3 cases."),
            (V{"The program stops.", "The Sub Main does not run!", "Why?", "3 cases."}));
  EXPECT_EQ(split_sentences("He said \"stop.\" Then it ended. (Really.) Yes"),
            (V{"He said \"stop.\"", "Then it ended.", "(Really.)", "Yes"}));
  EXPECT_EQ(split_sentences("Il a dit « oui. » Élodie est partie."),
            (V{"Il a dit « oui. »", "Élodie est partie."}));
}

TEST(Sentences, KeepsAbbreviationsNumbersAndLowerCaseContinuations) {
  EXPECT_EQ(split_sentences("Use e.g. The Draw tool, or see Fig. 3 and Mr. Smith."),
            (V{"Use e.g. The Draw tool, or see Fig. 3 and Mr. Smith."}));
  EXPECT_EQ(split_sentences("Version 7.4 is out. files end in .odt. see below"),
            (V{"Version 7.4 is out. files end in .odt. see below"}));
  EXPECT_EQ(split_sentences("J. R. R. Tolkien wrote it. Then..."),
            (V{"J. R. R. Tolkien wrote it.", "Then..."}));
  EXPECT_EQ(split_sentences("Wait... What?"), (V{"Wait...", "What?"}));
}

TEST(Sentences, WhitespaceAndEmptyLines) {
  EXPECT_EQ(split_sentences(""), V{});
  EXPECT_EQ(split_sentences("   "), V{});
  EXPECT_EQ(split_sentences("  one sentence without an end  "), (V{"one sentence without an end"}));
  EXPECT_EQ(split_sentences("End.\tNext.\n"), (V{"End.", "Next."}));
  EXPECT_EQ(split_sentences("Trailing dot. "), (V{"Trailing dot."}));
}
