// analyze()'s peak memory per rank is what a training step really holds
// (mtk/lower/memory_model.hpp): on small models and meshes of 1, 2 and 4 ranks the prediction is
// within 10% of Kokkos' high-water mark (every allocation MTK makes, counted by the Kokkos Tools
// callbacks) after a warm-up step and a second step, and the buffer pool's own high-water mark is
// the predicted pool.

#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/buffer_pool.hpp>
#include <mtk/base/kokkos_bytes.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "option_scope.hpp"
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

// A small LM whose buffers are large against the run's few small host-side allocations.
nn::TransformerConfig small_lm() {
  // vocab, d_model, d_ff, heads x d_kv, layers (tiny_transformer's 2), length, batch
  return sized_transformer({512, 64, 256, 4, 16, 2, 32, 8});
}

struct Case {
  std::string name;
  nn::TransformerConfig config;
  int microbatches = 1;
  std::string mesh, layout;
  DType state = DType::float32;  ///< how variables and Adam's slots are stored
};

struct Measured {
  long long predicted = 0, kokkos_peak = 0, pool_predicted = 0, pool_peak = 0;
};

Measured measure(const Case& k, int rank) {
  KokkosBytes::start();
  const long long before = KokkosBytes::live();
  KokkosBytes::reset();
  Graph g;
  optim::Adam opt;
  opt.set_state_dtypes(k.state, k.state);
  const nn::TrainingGraph t =
      nn::build_training(g, k.config, k.microbatches, opt, optim::LearningRateSchedule());
  const MeshShape shape = MeshShape::parse(k.mesh);
  const LayoutRules rules = LayoutRules::parse(k.layout);
  Measured m;
  const Counters c = analyze(g, shape, rules, rank)->counters();
  m.predicted = c.peak_bytes;
  m.pool_predicted = c.pool_bytes - c.outside_pool_bytes;
  {
    Mesh mesh(shape, MPI_COMM_WORLD);
    auto program = lower(g, mesh, rules);
    const auto feeds = lm_feeds(
        t.model, k.config, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3) % 500 + 1; },
        [](std::int64_t b, std::int64_t l) { return (b * 7 + l) % 500 + 1; });
    program->run(feeds, {t.model.loss});  // warm-up: the pool fills
    program->run(feeds, {t.model.loss});
    m.pool_peak = program->buffer_pool().peak_bytes();
  }
  m.kokkos_peak = KokkosBytes::peak() - before;
  return m;
}

std::vector<Case> cases(int ranks) {
  nn::TransformerConfig lm = small_lm();
  nn::TransformerConfig layer = lm;
  layer.recompute = nn::Recompute::layer;
  nn::TransformerConfig moe = small_lm();
  moe.moe_every = 2;
  moe.moe.num_experts = 4;
  const std::string model_rules = "vocab:model;d_ff:model;heads:model";
  if (ranks == 1)
    return {{"dense", lm, 1, "all:1", ""},
            {"recompute layer", layer, 1, "all:1", ""},
            {"microbatches 2", lm, 2, "all:1", ""},
            {"moe", moe, 1, "all:1", ""},
            {"bf16 variables, slots", lm, 1, "all:1", "", DType::bfloat16}};
  if (ranks == 2)
    return {{"data parallel", lm, 1, "batch:2", "batch:batch"},
            {"model parallel", lm, 1, "model:2", model_rules},
            {"layer, microbatches 2", layer, 2, "batch:2", "batch:batch"},
            {"moe, experts split", moe, 1, "batch:2", "batch:batch;experts:batch"},
            {"bf16 state, model par.", lm, 1, "model:2", model_rules, DType::bfloat16}};
  return {
      {"data parallel", lm, 1, "batch:4", "batch:batch"},
      {"2-d", lm, 1, "batch:2;model:2", "batch:batch;" + model_rules},
      {"model parallel", lm, 1, "model:4", model_rules},
      {"bf16 state, 2-d", lm, 1, "batch:2;model:2", "batch:batch;" + model_rules, DType::bfloat16}};
}

}  // namespace

TEST(MemoryPrediction, PeakWithinTenPercentOfKokkosHighWaterMark) {
  const Communicator world = Communicator::world();
  const int ranks = world.size();
  if (ranks != 1 && ranks != 2 && ranks != 4)
    GTEST_SKIP() << "meshes for 1, 2 and 4 ranks";
  for (const Case& k : cases(ranks)) {
    const Measured m = measure(k, world.rank());
    const double ratio = static_cast<double>(m.predicted) / static_cast<double>(m.kokkos_peak);
    if (world.rank() == 0)
      std::printf(
          "%d ranks, %-22s %-16s predicted %8.1f KiB, Kokkos peak %8.1f KiB (%.3f); pool "
          "predicted %8.1f KiB, pool peak %8.1f KiB\n",
          ranks, k.name.c_str(), k.mesh.c_str(), m.predicted / 1024.0, m.kokkos_peak / 1024.0,
          ratio, m.pool_predicted / 1024.0, m.pool_peak / 1024.0);
    EXPECT_NEAR(ratio, 1.0, 0.10) << k.name << " on " << k.mesh << ", rank " << world.rank();
    // The pool's own high-water mark: the predicted pool, less what the prediction counts outside
    // it (the packed buckets of overlapped reductions, the variables' bf16 copies).
    EXPECT_LE(m.pool_peak, m.pool_predicted * 101 / 100) << k.name << " on " << k.mesh;
    EXPECT_GE(m.pool_peak, m.pool_predicted * 99 / 100) << k.name << " on " << k.mesh;
  }
}

// bfloat16 variables and slots (train.variable_dtype, train.optimizer_slot_dtype) halve the state's
// bytes in the prediction and in what Kokkos really allocates.
TEST(MemoryPrediction, Bf16StateLowersPredictionAndKokkosPeakAlike) {
  const Communicator world = Communicator::world();
  if (world.size() != 1)
    GTEST_SKIP() << "one rank";
  Case f32{"float32 state", small_lm(), 1, "all:1", ""};
  Case bf16 = f32;
  bf16.state = DType::bfloat16;
  const Measured a = measure(f32, 0), b = measure(bf16, 0);
  std::printf(
      "float32 state: predicted %.1f KiB, Kokkos peak %.1f KiB; bf16 state: predicted "
      "%.1f KiB, Kokkos peak %.1f KiB\n",
      a.predicted / 1024.0, a.kokkos_peak / 1024.0, b.predicted / 1024.0, b.kokkos_peak / 1024.0);
  EXPECT_LT(b.predicted, a.predicted);
  EXPECT_LT(b.kokkos_peak, a.kokkos_peak);
  // What the prediction saves, Kokkos saves too (within 10% of the saving).
  const double saved = static_cast<double>(a.predicted - b.predicted);
  EXPECT_NEAR(static_cast<double>(a.kokkos_peak - b.kokkos_peak), saved, 0.1 * saved);
}

// MTK_MEMORY_REPORT=1: the prediction prints what is alive at its most live moment, by the step
// that wrote it, and the planned objects next to the most live bytes and an offset plan; the
// prediction itself does not change.
TEST(MemoryPrediction, ReportNamesWhatIsAliveAtThePeak) {
  const Communicator world = Communicator::world();
  if (world.size() != 1)
    GTEST_SKIP() << "one rank";
  const nn::TransformerConfig c = small_lm();
  Graph g;
  optim::Adam opt;
  nn::build_training(g, c, 1, opt, optim::LearningRateSchedule());
  const MeshShape shape = MeshShape::parse("all:1");
  const std::int64_t quiet = analyze(g, shape, LayoutRules(), 0)->counters().peak_bytes;
  std::int64_t reported = 0;
  std::string text;
  {
    const OptionScope report({{"MTK_MEMORY_REPORT", "1"}});
    testing::internal::CaptureStderr();
    reported = analyze(g, shape, LayoutRules(), 0)->counters().peak_bytes;
    text = testing::internal::GetCapturedStderr();
  }
  EXPECT_EQ(reported, quiet);
  EXPECT_NE(text.find("alive at once before step"), std::string::npos) << text;
  EXPECT_NE(text.find("(variable, slot or feed)"), std::string::npos) << text;
  // The logits, [8, 32, 512] floats, are alive at the peak (the start of the backward).
  EXPECT_NE(text.find("vocab=512]"), std::string::npos) << text;
  EXPECT_NE(text.find("an offset plan"), std::string::npos) << text;
}

// x W: the weight's gradient part (dy x, the last read of the activation x) is made before x's
// (dy W) whichever operand the weight is, so x dies before its gradient is allocated and the
// operand order does not change the most live bytes.
TEST(MemoryPrediction, WeightGradientFirstWhicheverOperandTheWeightIs) {
  if (Communicator::world().size() != 1)
    GTEST_SKIP() << "one rank";
  const Shape hs{{"b", 64}, {"e", 1024}}, ys{{"b", 64}, {"f", 1024}};
  auto live_peak = [&](bool weight_second) {
    Graph g;
    const Tensor x = placeholder(g, "x", Shape{{"b", 64}, {"d", 64}});
    const Tensor w1 = variable(g, "w1", Shape{{"d", 64}, {"e", 1024}}, Initializer::normal(1.0f));
    const Tensor w2 = variable(g, "w2", Shape{{"e", 1024}, {"f", 1024}}, Initializer::normal(1.0f));
    const Tensor h = einsum({x, w1}, hs);
    const Tensor y = weight_second ? einsum({h, w2}, ys) : einsum({w2, h}, ys);
    gradients(reduce_sum(square(y)), {w1, w2});
    return analyze(g, MeshShape::parse("all:1"), LayoutRules(), 0)->counters().live_peak_bytes;
  };
  EXPECT_EQ(live_peak(true), live_peak(false));
}
