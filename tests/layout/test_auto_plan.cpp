// `mesh: auto` and `layout: auto` (apps/common/auto_plan.hpp, docs/memory.md#mesh-auto): every
// rank gets the same plan, the same each time; the plan fits the memory limit and its figures are
// what analyze() gives for the mesh, layout, recomputation and microbatches it chose; a tight limit
// makes it choose recomputation or microbatches, and loss chunks for a model whose peak is its
// logits; an impossible one fails on every rank with the model, the ranks, the memory and the
// smallest peak; a given layout or mesh is kept.

#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/cost/memory_plans.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "auto_plan.hpp"
#include <algorithm>
#include <string>
#include <vector>

using namespace mtk;

namespace {

// A tiny LM whose activations are a large part of its peak.
const char* kModel =
    "model: {vocab_size: 256, d_model: 32, d_ff: 128, num_heads: 4, d_kv: 8, num_layers: 2, "
    "length: 64, batch: 8}\n";
// Its logits are its peak: a large vocabulary, one sequence per batch (no microbatches).
const char* kLogitsBound =
    "model: {vocab_size: 4096, d_model: 32, d_ff: 64, num_heads: 2, d_kv: 16, num_layers: 1, "
    "length: 256, batch: 1}\n";

struct Planned {
  Config config = Config::from_string("{}");
  nn::TransformerConfig model;
  config::TrainingSettings train;
  app::AutoPlan plan;
};

// The model with `extra` (mesh and layout lines) and train.memory_per_rank = `memory` ("": none).
Planned plan_with(const std::string& extra, const std::string& memory = "",
                  const char* model = kModel) {
  Planned p;
  p.config = Config::from_string(std::string(model) + extra + "train: {optimizer: adafactor" +
                                 (memory.empty() ? "" : ", memory_per_rank: " + memory) + "}\n");
  p.model = transformer_config_from(p.config);
  p.train = config::read_training_settings(p.config);
  p.plan = app::plan_auto(p.config, p.model, p.train, "no-run-dir", Communicator::world(),
                          "test_auto_plan");
  return p;
}

// The predicted peak of the plan as chosen (analyze() on its mesh, layout and settings).
std::int64_t analyzed_peak(const Planned& p) {
  Graph g;
  cost::build_training_graph(g, p.model,
                             {p.plan.recompute, p.plan.microbatches, p.plan.loss_chunks},
                             [&] { return config::make_optimizer(p.train.optimizer); });
  return analyze(g, p.plan.mesh, p.plan.rules)->counters().peak_bytes;
}

// The smallest peak of any layout with the configured settings (no recomputation, k = 1).
std::int64_t smallest_configured_peak() {
  const Planned p = plan_with("mesh: auto\nlayout: auto\n");
  Graph g;
  cost::build_training_graph(g, p.model, {},
                             [&] { return config::make_optimizer(p.train.optimizer); });
  cost::SearchOptions o;
  o.processors = Communicator::world().size();
  return cost::search_layouts(g, cost::reference_machine(), o).min_peak_bytes;
}

// The smallest peak of `model` without loss chunks, over every recompute mode and microbatch count.
std::int64_t smallest_unchunked_peak(const char* model) {
  const Planned p = plan_with("mesh: auto\nlayout: auto\n", "", model);
  cost::SearchOptions o;
  o.processors = Communicator::world().size();
  std::vector<cost::MemorySettings> settings = cost::memory_settings_to_try(p.model, {});
  settings.push_back({});
  std::int64_t smallest = 0;
  for (const cost::MemorySettings& s : settings) {
    if (s.loss_chunks != 1)
      continue;
    Graph g;
    cost::build_training_graph(g, p.model, s,
                               [&] { return config::make_optimizer(p.train.optimizer); });
    const std::int64_t peak = cost::search_layouts(g, cost::reference_machine(), o).min_peak_bytes;
    smallest = smallest == 0 ? peak : std::min(smallest, peak);
  }
  return smallest;
}

}  // namespace

TEST(AutoPlan, EveryRankRunsTheSamePlanEveryTime) {
  const Communicator world = Communicator::world();
  const Planned a = plan_with("mesh: auto\nlayout: auto\n", "1GiB");
  ASSERT_TRUE(a.plan.planned());
  EXPECT_EQ(a.plan.mesh.num_processors(), world.size());
  const std::string text = a.plan.mesh.to_string() + " | " + a.plan.rules.to_string();
  EXPECT_EQ(world.broadcast(text, 0), text) << "rank " << world.rank();
  const Planned b = plan_with("mesh: auto\nlayout: auto\n", "1GiB");
  EXPECT_EQ(b.plan.mesh.to_string() + " | " + b.plan.rules.to_string(), text);
  EXPECT_EQ(b.plan.step_s, a.plan.step_s);
  EXPECT_EQ(a.plan.memory_bytes, std::int64_t{1} << 30);
}

TEST(AutoPlan, FitsTheLimitAndRecordsWhatRuns) {
  const Planned p = plan_with("mesh: auto\nlayout: auto\n", "1GiB");
  EXPECT_LE(p.plan.peak_bytes, p.plan.memory_bytes);
  EXPECT_EQ(analyzed_peak(p), p.plan.peak_bytes);
  // The config now holds the plan: what the app lowers and config.resolved.yaml records.
  EXPECT_EQ(p.config.mesh_shape().to_string(), p.plan.mesh.to_string());
  EXPECT_EQ(p.config.layout_rules().to_string(), p.plan.rules.to_string());
  EXPECT_EQ(p.config.get_int("train.microbatches"), p.plan.microbatches);
  const std::string comment = p.plan.yaml_comment();
  EXPECT_NE(comment.find("mesh: auto"), std::string::npos) << comment;
  EXPECT_NE(comment.find("mesh: \"" + p.plan.mesh.to_string() + "\""), std::string::npos);
  EXPECT_NE(comment.find("layout: \"" + p.plan.rules.to_string() + "\""), std::string::npos);
  EXPECT_NE(p.plan.describe().find(p.plan.mesh.to_string()), std::string::npos);
}

// Any of the three memory settings may be what fits (loss chunks alone, where in-place optimizer
// updates leave the logits as the peak); the plan must change at least one and run what it says.
TEST(AutoPlan, ATightLimitChoosesRecomputeMicrobatchesOrLossChunks) {
  const std::int64_t smallest = smallest_configured_peak();
  const Planned p = plan_with("mesh: auto\nlayout: auto\n", std::to_string(smallest - 1));
  EXPECT_TRUE(p.plan.recompute != nn::Recompute::none || p.plan.microbatches > 1 ||
              p.plan.loss_chunks > 1)
      << p.plan.describe();
  EXPECT_EQ(p.model.loss_chunks, p.plan.loss_chunks);
  EXPECT_LT(p.plan.peak_bytes, smallest);
  EXPECT_EQ(analyzed_peak(p), p.plan.peak_bytes);
  EXPECT_EQ(p.model.recompute, p.plan.recompute);
  EXPECT_EQ(p.train.microbatches, p.plan.microbatches);
}

TEST(AutoPlan, ALogitsBoundModelGetsLossChunks) {
  const std::int64_t smallest = smallest_unchunked_peak(kLogitsBound);
  const Planned p =
      plan_with("mesh: auto\nlayout: auto\n", std::to_string(smallest - 1), kLogitsBound);
  EXPECT_GT(p.plan.loss_chunks, 1) << p.plan.describe();
  EXPECT_LE(p.plan.peak_bytes, p.plan.memory_bytes);
  EXPECT_EQ(analyzed_peak(p), p.plan.peak_bytes);
  // What trains and what config.resolved.yaml records.
  EXPECT_EQ(p.model.loss_chunks, p.plan.loss_chunks);
  EXPECT_EQ(p.config.get_int("model.loss_chunks"), p.plan.loss_chunks);
  const std::string chunks = std::to_string(p.plan.loss_chunks);
  EXPECT_NE(p.plan.describe().find("model.loss_chunks " + chunks), std::string::npos)
      << p.plan.describe();
  EXPECT_NE(p.plan.yaml_comment().find("loss_chunks: " + chunks), std::string::npos)
      << p.plan.yaml_comment();
}

TEST(AutoPlan, AnImpossibleLimitFailsOnEveryRank) {
  const int ranks = Communicator::world().size();
  try {
    plan_with("mesh: auto\nlayout: auto\n", "64K");
    FAIL() << "expected an error";
  } catch (const AgreedError& e) {
    const std::string what = e.what();
    for (const std::string& part :
         {std::string("test_auto_plan"), std::string("d_model"), std::to_string(ranks) + " ranks",
          std::string("memory limit of"), std::string("smallest peak")})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
  }
}

TEST(AutoPlan, AGivenLayoutKeepsItsLayout) {
  const Planned p = plan_with("mesh: auto\nlayout: \"batch:batch;d_ff:model\"\n");
  EXPECT_FALSE(p.plan.layout_auto);
  EXPECT_EQ(p.plan.rules.to_string(), "batch:batch;d_ff:model");
  EXPECT_EQ(p.plan.mesh.num_processors(), Communicator::world().size());
  for (const auto& d : p.plan.mesh.dims())
    EXPECT_TRUE(d.name == "batch" || d.name == "model") << p.plan.mesh.to_string();
}

TEST(AutoPlan, AGivenMeshKeepsItsMesh) {
  const std::string mesh = "model:" + std::to_string(Communicator::world().size());
  const Planned p = plan_with("mesh: \"" + mesh + "\"\nlayout: auto\n");
  EXPECT_FALSE(p.plan.mesh_auto);
  EXPECT_EQ(p.plan.mesh.to_string(), mesh);
}

TEST(AutoPlan, NothingAutoPlansNothing) {
  const Planned p = plan_with("mesh: \"batch:1\"\nlayout: \"batch:batch\"\n");
  EXPECT_FALSE(p.plan.planned());
}
