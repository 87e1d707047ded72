// BLEU equal to sacreBLEU 2.x's default corpus BLEU: the published cases, the 13a tokenizer's
// rules, and the edge cases (empty hypotheses, orders without a match, several references,
// unicode whitespace, line-count mismatch).
#include <mtk/base/error.hpp>
#include <mtk/text/bleu.hpp>
#include <mtk/text/tokenizer_13a.hpp>
#include <mtk/text/utf8.hpp>

#include <gtest/gtest.h>

#include <cmath>

namespace {

using mtk::text::corpus_bleu;
using mtk::text::tokenize_13a;

const std::vector<std::string> kHyps = {"The dog bit the man.", "It wasn't surprising.",
                                        "The man had just bitten him."};
const std::vector<std::string> kRefs1 = {"The dog bit the man.", "It was not unexpected.",
                                         "The man bit him first."};
const std::vector<std::string> kRefs2 = {"The dog had bit the man.", "No one was surprised.",
                                         "The man had bitten the dog."};

TEST(Bleu, PublishedTwoReferenceCase) {
  const auto s = corpus_bleu(kHyps, {kRefs1, kRefs2});
  EXPECT_NEAR(s.score, 48.530827009929865, 1e-9);
  EXPECT_EQ(s.stats.hyp_len, 17);
  EXPECT_EQ(s.stats.ref_len, 18);
  EXPECT_NEAR(s.brevity_penalty, 0.943, 5e-4);
  const std::string head =
      "BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.3 = 48.53 ";
  EXPECT_EQ(s.line().substr(0, head.size()), head);
  EXPECT_NE(s.line().find("(BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)"),
            std::string::npos)
      << s.line();
}

TEST(Bleu, PublishedSingleSentenceCases) {
  EXPECT_NEAR(corpus_bleu({"Hello, world!"}, {{"Hello world!"}}).score, 35.35533905932737, 1e-9);
  EXPECT_NEAR(corpus_bleu({"this is a fest"}, {{"this is a test"}}).score, 59.460355750136046,
              1e-9);
}

TEST(Bleu, EmptyHypothesesScoreZero) {
  const auto s = corpus_bleu({"", "", ""}, {kRefs1, kRefs2});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.brevity_penalty, 0.0);
  EXPECT_EQ(s.stats.hyp_len, 0);
}

TEST(Bleu, NoMatchAtAnyOrderIsZeroNotSmoothed) {
  const auto s = corpus_bleu({"a b c d"}, {{"e f g h"}});
  EXPECT_EQ(s.score, 0.0);
  EXPECT_EQ(s.precisions[0], 0.0);
}

TEST(Bleu, OrdersWithoutMatchesAreSmoothedExponentially) {
  // 1-grams 2/3, 2-grams 0/2 -> 100/(2*2), 3-grams 0/1 -> 100/(4*1), 4-grams: no 4-gram, score 0.
  auto s = corpus_bleu({"a x b"}, {{"a y b"}});
  EXPECT_NEAR(s.precisions[0], 200.0 / 3, 1e-12);
  EXPECT_NEAR(s.precisions[1], 25.0, 1e-12);
  EXPECT_NEAR(s.precisions[2], 25.0, 1e-12);
  EXPECT_EQ(s.precisions[3], 0.0);
  EXPECT_LT(s.score, 1e-100);
  // Five tokens: every order has n-grams.
  s = corpus_bleu({"a x b c d"}, {{"a y b c d"}});
  // 1: 4/5; 2: 2/4; 3: 1/3; 4: 0/2 -> 100/(2*2).
  EXPECT_NEAR(s.score, std::pow(80.0 * 50.0 * (100.0 / 3) * 25.0, 0.25), 1e-9);
}

TEST(Bleu, ClosestReferenceLengthTiesGoToTheShorter) {
  // Hypothesis of 3 tokens, references of 2 and 4 tokens: both 1 away, 2 is taken.
  const auto s = corpus_bleu({"a b c"}, {{"a b"}, {"a b c d"}});
  EXPECT_EQ(s.stats.ref_len, 2);
}

TEST(Bleu, EmptyReferenceInOneStreamIsIgnored) {
  const auto one = corpus_bleu({"a b c d e"}, {{"a b c d e"}});
  const auto two = corpus_bleu({"a b c d e"}, {{"a b c d e"}, {""}});
  EXPECT_EQ(one.score, two.score);
  EXPECT_THROW(corpus_bleu({"a"}, {{""}}), mtk::Error);
}

TEST(Bleu, UnequalLineCountsAreAnErrorNamingBoth) {
  try {
    corpus_bleu({"a", "b"}, {{"a"}});
    FAIL() << "no error";
  } catch (const mtk::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("1 lines"), std::string::npos) << what;
    EXPECT_NE(what.find("2 hypotheses"), std::string::npos) << what;
  }
}

TEST(Bleu, LowercaseOptionAndSignature) {
  mtk::text::BleuOptions lc;
  lc.lowercase = true;
  const auto s = corpus_bleu({"THE DOG bit the man."}, {{"the dog bit the man."}}, lc);
  EXPECT_NEAR(s.score, 100.0, 1e-12);
  EXPECT_NE(s.signature().find("case:lc"), std::string::npos);
  EXPECT_EQ(mtk::text::lowercase("ÉTÉ À Ça"), "été à ça");
}

TEST(Tokenizer13a, SplitsPunctuationLikeSacreBleu) {
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("It wasn't surprising."), "It wasn't surprising .");
  EXPECT_EQ(tokenize_13a("Pi is 3.14, not 3,15."), "Pi is 3.14 , not 3,15 .");
  EXPECT_EQ(tokenize_13a("pages 10-12 and well-known"), "pages 10 - 12 and well-known");
  EXPECT_EQ(tokenize_13a("$5.00 (cheap) [x] {y} a/b @c #d"),
            "$ 5.00 ( cheap ) [ x ] { y } a / b @ c # d");
  EXPECT_EQ(tokenize_13a("&quot;Q&quot; &amp; A &lt;b&gt;"), "\" Q \" & A < b >");
  EXPECT_EQ(tokenize_13a("end...  "), "end . . .");
  EXPECT_EQ(tokenize_13a("a-\nb c\nd <skipped>"), "ab c d");
}

TEST(Tokenizer13a, UnicodeWhitespaceAndLetters) {
  // No-break space and ideographic space separate tokens (Python's str.split()); accented letters
  // before a period are split off like ASCII ones.
  EXPECT_EQ(tokenize_13a("a\xC2\xA0"
                         "b\xE3\x80\x80"
                         "c"),
            "a b c");
  EXPECT_EQ(tokenize_13a("l'été."), "l'été .");
  EXPECT_EQ(tokenize_13a(".été"), ". été");
  EXPECT_EQ(mtk::text::rstrip("x \xC2\xA0\n"), "x");
}

TEST(Bleu, UnicodeSegmentsScore) {
  const auto s = corpus_bleu({"L'été est là, enfin."}, {{"L'été est là, enfin."}});
  EXPECT_NEAR(s.score, 100.0, 1e-12);
  EXPECT_EQ(s.stats.hyp_len, 6);
}

}  // namespace
