// The layout search with recomputation, loss chunks and microbatches (mtk/cost/memory_plans.hpp):
// when no layout of the configured training step fits the memory limit, the search finds a plan
// with model.recompute, model.loss_chunks and train.microbatches whose predicted peak is under the
// limit, and lowering that plan and running a step holds under the limit (Kokkos' high-water mark
// and the buffer pool's). A model whose peak is its logits fits only with loss chunks.

#include <mtk/base/buffer_pool.hpp>
#include <mtk/base/kokkos_bytes.hpp>
#include <mtk/cost/memory_plans.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include <algorithm>
#include <cstdio>
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

// Activations dominate: a long sequence, a large vocabulary against small weights.
nn::TransformerConfig model() {
  // vocab, d_model, d_ff, heads x d_kv, layers, length, batch
  return sized_transformer({256, 32, 128, 4, 8, 3, 64, 8});
}

// The logits are the peak: a large vocabulary, a long sequence, one sequence per batch (so no
// microbatches) and small weights; recomputing layers leaves the loss head's floor.
nn::TransformerConfig logits_bound_model() {
  return sized_transformer({4096, 32, 64, 2, 16, 1, 256, 1});
}

cost::OptimizerFactory adam() {
  return [] { return std::make_unique<optim::Adam>(); };
}

struct Measured {
  long long pool_peak = 0, kokkos_peak = 0;
};

// Lowers `c` with the plan's settings on its mesh and layout over every rank and runs a warm-up
// step and a step: the buffer pool's and Kokkos' high-water marks.
Measured run_plan(const nn::TransformerConfig& c, const cost::MemoryPlan& plan,
                  const cost::OptimizerFactory& make_optimizer) {
  const cost::Candidate& pick = plan.result.ranked.front();
  KokkosBytes::start();
  const long long before = KokkosBytes::live();
  KokkosBytes::reset();
  Measured m;
  {
    Graph pg;
    nn::TransformerConfig pc = c;
    pc.recompute = plan.settings.recompute;
    pc.loss_chunks = plan.settings.loss_chunks;
    const std::unique_ptr<optim::Optimizer> opt = make_optimizer();
    const nn::TrainingGraph t = nn::build_training(
        pg, pc, static_cast<int>(plan.settings.microbatches), *opt, optim::LearningRateSchedule());
    Mesh mesh(pick.mesh, MPI_COMM_WORLD);
    auto program = lower(pg, mesh, pick.rules);
    const auto feeds = lm_feeds(
        t.model, pc, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3) % 250 + 1; },
        [](std::int64_t b, std::int64_t l) { return (b * 7 + l) % 250 + 1; });
    program->run(feeds, {t.model.loss});
    program->run(feeds, {t.model.loss});
    m.pool_peak = program->buffer_pool().peak_bytes();
  }
  m.kokkos_peak = KokkosBytes::peak() - before;
  return m;
}

}  // namespace

TEST(MemoryPlans, NothingFitsAsConfiguredButAPlanDoes) {
  const int ranks = Communicator::world().size();
  const nn::TransformerConfig c = model();
  const cost::MemorySettings configured;  // no recomputation, one batch
  cost::SearchOptions o;
  o.processors = ranks;
  // The limit: just under the smallest peak of any layout as configured.
  Graph g;
  cost::build_training_graph(g, c, configured, adam());
  const cost::SearchResult unlimited = cost::search_layouts(g, machine(), o);
  std::int64_t smallest = unlimited.ranked.front().counters.peak_bytes;
  for (const auto& k : unlimited.ranked)
    smallest = std::min(smallest, k.counters.peak_bytes);
  o.memory_bytes = smallest * 9 / 10;
  EXPECT_THROW(cost::search_layouts(g, machine(), o), Error) << "today's search finds nothing";

  const cost::MemoryPlanSearch s =
      cost::search_with_memory_settings(c, configured, adam(), machine(), o);
  EXPECT_TRUE(s.configured.result.ranked.empty());
  ASSERT_FALSE(s.plans.empty());
  const cost::MemoryPlan& best = s.plans.front();
  const cost::Candidate& pick = best.result.ranked.front();
  EXPECT_FALSE(best.settings == configured);
  EXPECT_LE(pick.counters.peak_bytes, o.memory_bytes);
  for (size_t i = 1; i < s.plans.size(); ++i)
    EXPECT_LE(pick.time.total_s, s.plans[i].result.ranked.front().time.total_s);
  const std::string args = best.settings.to_args();
  EXPECT_NE(args.find("--set model.recompute="), std::string::npos) << args;
  EXPECT_NE(args.find("--set train.microbatches="), std::string::npos) << args;

  // Measured: lower the plan on this many ranks and run a warm-up step and a step.
  const Measured m = run_plan(c, best, adam());
  if (Communicator::world().rank() == 0)
    std::printf(
        "%d ranks: limit %lld B (configured smallest %lld B); plan %s on %s %s: predicted "
        "%lld B, pool peak %lld B, Kokkos peak %lld B\n",
        ranks, static_cast<long long>(o.memory_bytes), static_cast<long long>(smallest),
        args.c_str(), pick.mesh.to_string().c_str(), pick.rules.to_string().c_str(),
        static_cast<long long>(pick.counters.peak_bytes), m.pool_peak, m.kokkos_peak);
  EXPECT_LE(m.pool_peak, o.memory_bytes);
  EXPECT_LE(m.kokkos_peak, o.memory_bytes);
}

TEST(MemoryPlans, ALogitsBoundModelFitsWithLossChunks) {
  const int ranks = Communicator::world().size();
  const nn::TransformerConfig c = logits_bound_model();
  cost::SearchOptions o;
  o.processors = ranks;
  // The smallest peak without loss chunks, over every recompute mode and microbatch count.
  std::int64_t smallest = 0;
  std::vector<cost::MemorySettings> unchunked = cost::memory_settings_to_try(c, {});
  unchunked.push_back({});
  for (const cost::MemorySettings& s : unchunked) {
    if (s.loss_chunks != 1)
      continue;
    Graph g;
    cost::build_training_graph(g, c, s, adam());
    const std::int64_t peak = cost::search_layouts(g, machine(), o).min_peak_bytes;
    smallest = smallest == 0 ? peak : std::min(smallest, peak);
  }
  o.memory_bytes = smallest - 1;

  const cost::MemoryPlanSearch s = cost::search_with_memory_settings(c, {}, adam(), machine(), o);
  ASSERT_FALSE(s.plans.empty());
  for (const cost::MemoryPlan& p : s.plans)
    EXPECT_GT(p.settings.loss_chunks, 1) << p.settings.to_args() << " fits without loss chunks";
  const cost::MemoryPlan& best = s.plans.front();
  const cost::Candidate& pick = best.result.ranked.front();
  EXPECT_LE(pick.counters.peak_bytes, o.memory_bytes);
  EXPECT_EQ(c.length % best.settings.loss_chunks, 0);
  const std::string args = best.settings.to_args();
  EXPECT_NE(args.find("--set model.loss_chunks=" + std::to_string(best.settings.loss_chunks)),
            std::string::npos)
      << args;

  // The chunks' extra compute is priced: more FLOPs than the same layout without them.
  Graph plain;
  cost::MemorySettings unchunked_pick = best.settings;
  unchunked_pick.loss_chunks = 1;
  cost::build_training_graph(plain, c, unchunked_pick, adam());
  EXPECT_GT(pick.counters.total_flops(),
            analyze(plain, pick.mesh, pick.rules)->counters().total_flops());

  const Measured m = run_plan(c, best, adam());
  if (Communicator::world().rank() == 0)
    std::printf(
        "%d ranks: limit %lld B (smallest without loss chunks %lld B); plan %s on %s %s: "
        "predicted %lld B, pool peak %lld B, Kokkos peak %lld B\n",
        ranks, static_cast<long long>(o.memory_bytes), static_cast<long long>(smallest),
        args.c_str(), pick.mesh.to_string().c_str(), pick.rules.to_string().c_str(),
        static_cast<long long>(pick.counters.peak_bytes), m.pool_peak, m.kokkos_peak);
  EXPECT_LE(m.pool_peak, o.memory_bytes);
  EXPECT_LE(m.kokkos_peak, o.memory_bytes);
}
