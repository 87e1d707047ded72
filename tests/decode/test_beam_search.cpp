// Beam search and greedy search on fake step functions (host tables of probabilities by prefix),
// against expectations computed by hand: EOS handling, the length penalty, max_length, ties.

#include <mtk/decode/beam_search.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

namespace {

using mtk::decode::BeamSearchOptions;
using mtk::decode::Hypothesis;
using mtk::decode::StepFunction;
using Prefix = std::vector<std::int32_t>;

constexpr std::int32_t EOS = 1, A = 2, B = 3;

// A model given by a function of (row, prefix): tracks each hypothesis' prefix from tokens and
// parents exactly as a cached model must, so wrong parents give wrong probabilities.
struct FakeModel {
  std::int64_t batch, beam, vocab;
  std::function<std::vector<double>(std::int64_t row, const Prefix& prefix)> probs;
  std::vector<Prefix> prefixes;
  int calls = 0;

  StepFunction step() {
    return [this](std::int64_t position, const std::vector<std::int32_t>& tokens,
                  const std::vector<std::int32_t>& parents) {
      ++calls;
      EXPECT_EQ(static_cast<std::int64_t>(tokens.size()), batch * beam);
      std::vector<Prefix> next(static_cast<size_t>(batch * beam));
      std::vector<float> out;
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t k = 0; k < beam; ++k) {
          const auto r = static_cast<size_t>(b * beam + k);
          EXPECT_GE(parents[r], 0);
          EXPECT_LT(parents[r], beam);
          if (position > 0)
            next[r] = prefixes[static_cast<size_t>(b * beam + parents[r])];
          if (position > 0)
            next[r].push_back(tokens[r]);  // the start token (position 0) is no part of it
          for (double p : probs(b, next[r]))
            out.push_back(static_cast<float>(std::log(p)));
        }
      prefixes = std::move(next);
      return out;
    };
  }
};

// Row 0's table (vocab: 0 start/pad, 1 EOS, 2 a, 3 b).
std::vector<double> table(std::int64_t, const Prefix& p) {
  if (p.empty())
    return {0, 0.36, 0.40, 0.24};
  if (p == Prefix{A})
    return {0, 0.85, 0.10, 0.05};
  if (p == Prefix{B})
    return {0, 0.50, 0.25, 0.25};
  return {0, 0.90, 0.05, 0.05};
}

double lp(double alpha, std::int64_t length) {
  return std::pow((5.0 + length) / 6.0, alpha);
}

void expect_hypothesis(const Hypothesis& h, const Prefix& tokens, double prob, bool finished,
                       double alpha, const char* what) {
  EXPECT_EQ(h.tokens, tokens) << what;
  EXPECT_EQ(h.finished, finished) << what;
  EXPECT_NEAR(h.log_prob, std::log(prob), 1e-6) << what;
  const std::int64_t len = static_cast<std::int64_t>(tokens.size()) + (finished ? 1 : 0);
  EXPECT_NEAR(h.score, std::log(prob) / lp(alpha, len), 1e-6) << what;
}

}  // namespace

TEST(BeamSearch, LengthPenaltyIsTensor2Tensors) {
  EXPECT_DOUBLE_EQ(mtk::decode::length_penalty(1, 0.6), 1.0);
  EXPECT_NEAR(mtk::decode::length_penalty(7, 0.6), std::pow(2.0, 0.6), 1e-12);
  EXPECT_DOUBLE_EQ(mtk::decode::length_penalty(9, 0.0), 1.0);
}

// By hand, beam 2: position 0 ranks a (.40), EOS (.36: finished, []), b (.24); position 1 ranks
// a,EOS (.34: finished), b,EOS (.12: finished), b,a and b,b. Three finished; the best two stay.
// With alpha 0.6, [a] scores log(.34) / (7/6)^0.6 = -0.98 and beats [] (log .36 = -1.02); with
// alpha 0 the shorter [] wins.
TEST(BeamSearch, FinishesOnEosAndRanksByLengthPenalty) {
  for (double alpha : {0.6, 0.0}) {
    FakeModel m{1, 2, 4, table, {}, 0};
    BeamSearchOptions o;
    o.beam_size = 2;
    o.alpha = alpha;
    o.max_length = 10;
    auto r = mtk::decode::beam_search(m.step(), 1, 4, o);
    ASSERT_EQ(r.size(), 1u);
    ASSERT_EQ(r[0].size(), 2u);
    if (alpha > 0) {
      expect_hypothesis(r[0][0], {A}, 0.34, true, alpha, "best, alpha 0.6");
      expect_hypothesis(r[0][1], {}, 0.36, true, alpha, "second, alpha 0.6");
    } else {
      expect_hypothesis(r[0][0], {}, 0.36, true, alpha, "best, alpha 0");
      expect_hypothesis(r[0][1], {A}, 0.34, true, alpha, "second, alpha 0");
    }
    EXPECT_EQ(m.calls, 2) << "beam_size hypotheses finished and none live can beat them";
  }
}

// Tensor2Tensor's stop: beam 2, [] (.30) and [b] (.225) finish by position 1 while [a, a] (.432)
// lives on; it can still beat them (log .432 / penalty(max_length) > the worst finished score), so
// the search goes on and [a, a] finishes at .389 (score -0.80, above [] at -1.20). Then the best
// live one (.0216) can no longer win: the row stops after 3 steps.
std::vector<double> late_table(std::int64_t, const Prefix& p) {
  if (p.empty())
    return {0, 0.30, 0.45, 0.25};
  if (p == Prefix{A})
    return {0, 0.02, 0.96, 0.02};
  if (p == Prefix{B})
    return {0, 0.90, 0.05, 0.05};
  return {0, 0.90, 0.05, 0.05};
}

TEST(BeamSearch, GoesOnWhileALiveHypothesisCanStillWin) {
  FakeModel m{1, 2, 4, late_table, {}, 0};
  BeamSearchOptions o;
  o.beam_size = 2;
  o.alpha = 0.6;
  o.max_length = 10;
  auto r = mtk::decode::beam_search(m.step(), 1, 4, o);
  ASSERT_EQ(r[0].size(), 2u);
  expect_hypothesis(r[0][0], {A, A}, 0.45 * 0.96 * 0.90, true, 0.6, "the late winner");
  expect_hypothesis(r[0][1], {}, 0.30, true, 0.6, "the early EOS");
  EXPECT_EQ(m.calls, 3) << "stops when no live hypothesis can beat the finished ones";
}

// max_length 1: EOS (.36) finishes; of the live ones only a (rank 0 among the candidates) ends
// unended; b (rank 2) does not.
TEST(BeamSearch, MaxLengthEndsTheBestLiveHypotheses) {
  FakeModel m{1, 2, 4, table, {}, 0};
  BeamSearchOptions o;
  o.beam_size = 2;
  o.max_length = 1;
  auto r = mtk::decode::beam_search(m.step(), 1, 4, o);
  ASSERT_EQ(r[0].size(), 2u);
  expect_hypothesis(r[0][0], {A}, 0.40, false, 0.6, "cut at max_length");
  expect_hypothesis(r[0][1], {}, 0.36, true, 0.6, "EOS");
}

// Equal log-probabilities: candidates rank by (slot, token). Position 0: EOS (finished []), a, b
// live; position 1: slot 0's EOS finishes [a]; slot 1's EOS is not among the best two.
TEST(BeamSearch, TiesBreakByBeamSlotThenTokenId) {
  FakeModel m{1,
              2,
              4,
              [](std::int64_t, const Prefix&) {
                return std::vector<double>{0, 1.0 / 3, 1.0 / 3, 1.0 / 3}; },
              {},
              0};
  BeamSearchOptions o;
  o.beam_size = 2;
  auto r = mtk::decode::beam_search(m.step(), 1, 4, o);
  ASSERT_EQ(r[0].size(), 2u);
  expect_hypothesis(r[0][0], {}, 1.0 / 3, true, 0.6, "tie 1");
  expect_hypothesis(r[0][1], {A}, 1.0 / 9, true, 0.6, "tie 2");
}

// Rows are independent: row 1 (decode a, a, a, then EOS) keeps stepping after row 0 is done.
TEST(BeamSearch, RowsDecodeIndependently) {
  auto probs = [](std::int64_t row, const Prefix& p) {
    if (row == 0)
      return table(row, p);
    return p.size() < 3 ? std::vector<double>{0, 0.1, 0.8, 0.1}
                        : std::vector<double>{0, 0.7, 0.2, 0.1};
  };
  FakeModel m{2, 1, 4, probs, {}, 0};
  BeamSearchOptions o;
  o.beam_size = 1;
  auto r = mtk::decode::beam_search(m.step(), 2, 4, o);
  expect_hypothesis(r[0][0], {A}, 0.34, true, 0.6, "row 0");
  expect_hypothesis(r[1][0], {A, A, A}, 0.8 * 0.8 * 0.8 * 0.7, true, 0.6, "row 1");
  EXPECT_EQ(m.calls, 4);
}

// Beam 1 is greedy search, on random tables (random per prefix, some EOS-heavy).
TEST(BeamSearch, BeamOneIsGreedy) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    auto probs = [seed](std::int64_t row, const Prefix& p) {
      std::uint64_t h = seed * 1000003u + static_cast<std::uint64_t>(row) * 7919u;
      for (auto t : p)
        h = h * 31 + static_cast<std::uint64_t>(t);
      std::mt19937_64 rng(h);
      std::vector<double> v(6);
      double sum = 0;
      for (auto& x : v)
        sum += x = std::uniform_real_distribution<double>(0.01, 1.0)(rng);
      for (auto& x : v)
        x /= sum;
      return v;
    };
    BeamSearchOptions o;
    o.beam_size = 1;
    o.max_length = 1 + seed % 7;
    FakeModel a{3, 1, 6, probs, {}, 0}, b{3, 1, 6, probs, {}, 0};
    auto beam = mtk::decode::beam_search(a.step(), 3, 6, o);
    auto greedy = mtk::decode::greedy_search(b.step(), 3, 6, o);
    for (size_t row = 0; row < 3; ++row) {
      ASSERT_EQ(beam[row].size(), 1u);
      EXPECT_EQ(beam[row][0].tokens, greedy[row].tokens) << "seed " << seed << " row " << row;
      EXPECT_EQ(beam[row][0].finished, greedy[row].finished);
      EXPECT_NEAR(beam[row][0].score, greedy[row].score, 1e-9);
    }
    // Wider beams: sorted, at most beam_size, log_prob = the sum along the tokens.
    for (std::int64_t K : {2, 3, 5}) {
      o.beam_size = K;
      FakeModel c{3, K, 6, probs, {}, 0};
      auto r = mtk::decode::beam_search(c.step(), 3, 6, o);
      for (size_t row = 0; row < 3; ++row) {
        ASSERT_FALSE(r[row].empty());
        ASSERT_LE(static_cast<std::int64_t>(r[row].size()), K);
        for (size_t i = 0; i < r[row].size(); ++i) {
          const Hypothesis& h = r[row][i];
          if (i > 0) {
            EXPECT_GE(r[row][i - 1].score, h.score);
          }
          double sum = 0;
          Prefix p;
          for (auto t : h.tokens) {
            sum += std::log(static_cast<double>(static_cast<float>(probs(row, p)[t])));
            p.push_back(t);
          }
          if (h.finished)
            sum += std::log(probs(row, p)[EOS]);
          EXPECT_NEAR(h.log_prob, sum, 1e-5) << "seed " << seed << " K " << K;
          EXPECT_LE(h.length(), o.max_length);
        }
      }
    }
  }
}

TEST(BeamSearch, WrongNumberOfLogProbsIsAnError) {
  StepFunction bad = [](std::int64_t, const std::vector<std::int32_t>&,
                        const std::vector<std::int32_t>&) { return std::vector<float>(3); };
  BeamSearchOptions o;
  try {
    mtk::decode::beam_search(bad, 2, 4, o);
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("8 hypotheses x 4 = 32"), std::string::npos) << e.what();
  }
  o.eos_id = 4;
  EXPECT_THROW(mtk::decode::beam_search(bad, 2, 4, o), std::exception);
}

// min_lengths: with at least 1 token before EOS in row 0, the table's empty hypothesis (.36)
// cannot finish; [a] (.34) and [b] (.12) are the two best, while row 1 (no minimum) still finishes
// []. Greedy with a minimum of 2 in row 1: EOS, its best token after [a], is ruled out there, so it
// takes a again and ends [a, a]; row 0 (no minimum) ends [a].
TEST(BeamSearch, MinLengthsRuleOutEarlyEos) {
  FakeModel m{2, 2, 4, table, {}, 0};
  BeamSearchOptions o;
  o.beam_size = 2;
  o.alpha = 0.0;
  o.max_length = 10;
  o.min_lengths = {1, 0};
  auto r = mtk::decode::beam_search(m.step(), 2, 4, o);
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].size(), 2u);
  expect_hypothesis(r[0][0], {A}, 0.34, true, 0.0, "row 0 best");
  expect_hypothesis(r[0][1], {B}, 0.12, true, 0.0, "row 0 second");
  expect_hypothesis(r[1][0], {}, 0.36, true, 0.0, "row 1 best: no minimum");

  FakeModel g{2, 1, 4, table, {}, 0};
  o.min_lengths = {0, 2};
  auto greedy = mtk::decode::greedy_search(g.step(), 2, 4, o);
  ASSERT_EQ(greedy.size(), 2u);
  EXPECT_EQ(greedy[0].tokens, (Prefix{A}));
  EXPECT_EQ(greedy[1].tokens, (Prefix{A, A}));
  EXPECT_TRUE(greedy[1].finished);

  o.min_lengths = {1};
  EXPECT_THROW(mtk::decode::beam_search(m.step(), 2, 4, o), std::exception)
      << "one minimum for two rows";
}
