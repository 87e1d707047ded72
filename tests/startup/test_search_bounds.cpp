// The layout search's memory bound (mtk/cost/layout_search.hpp memory_lower_bound): at most every
// candidate's predicted peak, with its variables' part exact, for dense, mixture-of-experts and
// encoder-decoder models, bf16 contractions, every memory setting and 1 to 8 processors; and a
// search that leaves out the candidates whose bound is over the limit ranks the same candidates
// and settings, and reports the same smallest peak when nothing fits.

#include <mtk/cost/memory_plans.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include <memory>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

cost::Machine machine() {
  cost::Machine m;
  m.name = "test";
  m.matmul_flops = 1e10;
  m.elementwise_bytes = 1e10;
  m.links = {{0, 1e9, 1e-5}};
  return m;
}

cost::OptimizerFactory adafactor() {
  return [] { return std::make_unique<optim::Adafactor>(); };
}

std::vector<nn::TransformerConfig> models() {
  std::vector<nn::TransformerConfig> out;
  nn::TransformerConfig dense = tiny_transformer();
  dense.vocab_size = 64;
  dense.length = 16;
  out.push_back(dense);
  out.push_back(tiny_transformer(true));
  out.push_back(tiny_transformer(false, true));
  nn::TransformerConfig bf16 = dense;
  bf16.activation_dtype = "bfloat16";
  out.push_back(bf16);
  return out;
}

std::string key(const cost::Candidate& c) {
  return c.mesh.to_string() + " / " + c.rules.to_string() + " / " + std::to_string(c.time.total_s);
}

TEST(SearchBounds, TheBoundIsUnderEveryCandidatesPeak) {
  int checked = 0;
  for (const nn::TransformerConfig& model : models())
    for (const cost::MemorySettings& s :
         {cost::MemorySettings{}, cost::MemorySettings{nn::Recompute::layer, 2, 2},
          cost::MemorySettings{nn::Recompute::attention, 4, 1},
          cost::MemorySettings{nn::Recompute::none, 1, 4}})
      for (int processors : {1, 2, 4, 8}) {
        SCOPED_TRACE(model.to_string() + " " + s.to_args() + " on " + std::to_string(processors));
        Graph g;
        cost::build_training_graph(g, model, s, adafactor());
        cost::SearchOptions o;
        o.processors = processors;
        const cost::SearchResult r = cost::search_layouts(g, machine(), o);
        for (const cost::Candidate& c : r.ranked) {
          const std::int64_t bound = cost::memory_lower_bound(
              g, c.mesh, c.rules, r.unsplit_live_peak_bytes, r.unsplit_variable_bytes);
          EXPECT_LE(bound, c.counters.peak_bytes) << key(c);
          EXPECT_LE(bound - c.counters.variable_bytes,
                    (r.unsplit_live_peak_bytes - r.unsplit_variable_bytes) / processors);
          EXPECT_EQ(cost::memory_lower_bound(g, c.mesh, c.rules, 0, 0), c.counters.variable_bytes)
              << key(c);
          ++checked;
        }
      }
  EXPECT_GT(checked, 500);
}

// The plans with and without the bound: the same candidates in the same order.
void expect_same(const cost::SearchResult& a, const cost::SearchResult& b) {
  ASSERT_EQ(a.ranked.size(), b.ranked.size());
  for (size_t i = 0; i < a.ranked.size(); ++i)
    EXPECT_EQ(key(a.ranked[i]), key(b.ranked[i]));
}

TEST(SearchBounds, LeavingOutByTheBoundFindsTheSamePlans) {
  nn::TransformerConfig small = tiny_transformer();
  small.batch = 4;   // microbatches 1, 2, 4
  small.length = 4;  // loss chunks 1, 2, 4
  for (const nn::TransformerConfig& model : {small})
    for (int processors : {2, 4}) {
      SCOPED_TRACE(model.to_string() + " on " + std::to_string(processors));
      const cost::MemorySettings configured;
      cost::SearchOptions o;
      o.processors = processors;
      Graph g;
      cost::build_training_graph(g, model, configured, adafactor());
      const cost::SearchResult unlimited = cost::search_layouts(g, machine(), o);
      std::int64_t smallest = unlimited.ranked.front().counters.peak_bytes;
      for (const auto& c : unlimited.ranked)
        smallest = std::min(smallest, c.counters.peak_bytes);
      // Limits from nothing fitting to nearly everything as configured.
      for (const double f : {0.3, 0.9}) {
        o.memory_bytes = static_cast<std::int64_t>(static_cast<double>(smallest) * f);
        SCOPED_TRACE(o.memory_bytes);
        cost::SearchOptions quiet = o;
        quiet.over_memory_fails = false;
        cost::SearchOptions bounded = quiet;
        bounded.skip_by_memory_bound = true;
        const cost::SearchResult plain = cost::search_layouts(g, machine(), quiet);
        const cost::SearchResult fast = cost::search_layouts(g, machine(), bounded);
        expect_same(plain, fast);
        EXPECT_EQ(plain.over_memory, fast.over_memory);
        EXPECT_EQ(plain.analyzed + 0, fast.analyzed + fast.bounded);
        if (plain.ranked.empty()) {
          EXPECT_TRUE(fast.min_peak_exact);
          EXPECT_EQ(plain.min_peak_bytes, fast.min_peak_bytes);
        }
        // The settings' search (with the bound inside) against one setting at a time without it.
        std::string plain_error, fast_error;
        cost::MemoryPlanSearch fast_plans;
        try {
          fast_plans =
              cost::search_with_memory_settings(model, configured, adafactor(), machine(), o);
        } catch (const Error& e) {
          fast_error = e.what();
        }
        std::vector<cost::MemoryPlan> plain_plans;
        std::int64_t plain_smallest = plain.min_peak_bytes;
        cost::MemorySettings plain_at = configured;
        if (plain.ranked.empty())
          for (const cost::MemorySettings& s : cost::memory_settings_to_try(model, configured)) {
            Graph sg;
            cost::build_training_graph(sg, model, s, adafactor());
            cost::SearchResult r;
            try {
              r = cost::search_layouts(sg, machine(), quiet);
            } catch (const Error&) {
              continue;
            }
            if (!r.ranked.empty())
              plain_plans.push_back({s, r});
            else if (r.min_peak_bytes > 0 && r.min_peak_bytes < plain_smallest)
              std::tie(plain_smallest, plain_at) = std::make_pair(r.min_peak_bytes, s);
          }
        cost::sort_plans(plain_plans);
        if (!plain.ranked.empty()) {
          EXPECT_TRUE(fast_error.empty()) << fast_error;
          expect_same(plain, fast_plans.configured.result);
        } else if (plain_plans.empty()) {
          EXPECT_NE(fast_error.find(cat("the smallest peak is ", plain_smallest, " bytes (",
                                        plain_at.to_args(), ")")),
                    std::string::npos)
              << fast_error;
        } else {
          ASSERT_TRUE(fast_error.empty()) << fast_error;
          ASSERT_EQ(plain_plans.size(), fast_plans.plans.size());
          for (size_t i = 0; i < plain_plans.size(); ++i) {
            EXPECT_EQ(plain_plans[i].settings.to_args(), fast_plans.plans[i].settings.to_args());
            expect_same(plain_plans[i].result, fast_plans.plans[i].result);
          }
        }
      }
    }
}

}  // namespace
