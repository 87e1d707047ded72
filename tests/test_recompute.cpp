// Recomputation (model.recompute, mtk/lower/recompute.hpp): training with `norms`, `attention`
// or `layer` recompute is bitwise training with `none` (the same steps run again on the same
// inputs) on every mesh and layout, for the dense language model, mixture of experts, the
// encoder-decoder, bf16 contractions and dropout; the distributed run equals one processor's
// within float32 reassociation; recomputation lowers the peak of live activations; the planner
// copies only a segment's replayable steps.

#include <mtk/lower/recompute.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>
#include <mtk/runtime/reductions_in_flight.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "program_fixtures.hpp"
#include "training_fixtures.hpp"
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

struct Trained {
  std::vector<float> losses;
  std::vector<float> weights;  // every variable's global value after the last step
  std::int64_t peak_bytes = 0;
  std::int64_t recomputed_steps = 0;
};

enum class Kind { dense, moe, encoder_decoder, bf16_dropout };

const char* name_of(Kind k) {
  switch (k) {
    case Kind::dense:
      return "dense";
    case Kind::moe:
      return "moe";
    case Kind::encoder_decoder:
      return "encoder-decoder";
    case Kind::bf16_dropout:
      return "bf16+dropout";
  }
  return "?";
}

nn::TransformerConfig config_of(Kind k, nn::Recompute r) {
  nn::TransformerConfig c =
      tiny_transformer(k == Kind::moe, /*encoder_decoder=*/k == Kind::encoder_decoder);
  if (k == Kind::bf16_dropout) {
    c.activation_dtype = "bfloat16";
    c.dropout = 0.1;
  }
  c.recompute = r;
  return c;
}

std::map<int, HostTensor> feeds_of(const nn::ModelGraph& m, const nn::TransformerConfig& c) {
  auto feeds = lm_feeds(
      m, c, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) { return (b * 7 + l * 3 + 4) % 31 + 1; });
  if (c.num_encoder_layers > 0) {
    const Shape s{{"batch", c.batch}, {"length", c.length}};
    std::vector<std::int32_t> in, seg, pos;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t l = 0; l < c.length; ++l) {
        in.push_back(static_cast<std::int32_t>((b * 3 + l * 11 + 2) % 31 + 1));
        seg.push_back(1);
        pos.push_back(static_cast<std::int32_t>(l));
      }
    feeds[m.encoder_inputs.id()] = HostTensor::ints(s, in);
    feeds[m.encoder_segments.id()] = HostTensor::ints(s, seg);
    feeds[m.encoder_positions.id()] = HostTensor::ints(s, pos);
  }
  return feeds;
}

// Two Adafactor steps of the model on `mesh` under `rules`.
Trained train(const nn::TransformerConfig& c, const Mesh& mesh, const LayoutRules& rules) {
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true, /*seed=*/5);
  minimize_for_test(m.loss);
  const auto feeds = feeds_of(m, c);
  auto p = lower(g, mesh, rules);
  Trained t;
  for (int k = 0; k < 2; ++k)
    t.losses.push_back(static_cast<float>(p->run(feeds, {m.loss})[0].at(0)));
  t.weights = global_weights(*p);
  t.peak_bytes = p->counters().peak_bytes;
  t.recomputed_steps = p->recomputed_steps();
  return t;
}

std::vector<std::string> layouts_of(Kind k) {
  if (k == Kind::moe)
    return {"batch:@0;experts:@0", "batch:@0;experts:@0;d_ff:@1;heads:@1;vocab:@1"};
  return {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"};
}

}  // namespace

TEST(Recompute, BitwiseEqualToNoneOnEveryMeshAndLayout) {
  for (Kind kind : {Kind::dense, Kind::moe, Kind::encoder_decoder, Kind::bf16_dropout}) {
    const Trained one =
        train(config_of(kind, nn::Recompute::none), single_processor_mesh(), LayoutRules());
    for (const auto& mshape : meshes_of_size(world_size())) {
      Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const auto& layout : layouts_of(kind)) {
        const auto rules = instantiate(layout, mshape);
        const std::string what =
            std::string(name_of(kind)) + " on " + mshape.to_string() + " layout " + layout;
        const Trained none = train(config_of(kind, nn::Recompute::none), mesh, rules);
        EXPECT_EQ(none.recomputed_steps, 0) << what;
        if (kind != Kind::bf16_dropout)  // bf16 rounding makes the 1-rank check loose
          expect_close(none, one, what + ": against one processor", 1e-4);
        for (auto r : {nn::Recompute::norms, nn::Recompute::attention, nn::Recompute::layer}) {
          const Trained re = train(config_of(kind, r), mesh, rules);
          const std::string w = what + " recompute " + nn::to_string(r);
          EXPECT_GT(re.recomputed_steps, 0) << w;
          expect_bitwise(re, none, w);
        }
      }
    }
  }
}

// model.loss_chunks on the encoder-decoder (the decoder's head is the language model's), with
// label smoothing and z-loss: within 1e-5 of one chunk on every mesh and layout, recompute none
// and layer (tests/test_microbatches.cpp has the language model).
TEST(LossChunks, EncoderDecoderEqualsOneChunk) {
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : layouts_of(Kind::encoder_decoder)) {
      const auto rules = instantiate(layout, mshape);
      for (auto r : {nn::Recompute::none, nn::Recompute::layer}) {
        nn::TransformerConfig c = config_of(Kind::encoder_decoder, r);
        c.label_smoothing = 0.1;
        c.z_loss = 1e-3;
        const Trained one = train(c, mesh, rules);
        c.loss_chunks = 4;
        const Trained chunked = train(c, mesh, rules);
        EXPECT_GT(chunked.recomputed_steps, one.recomputed_steps);
        expect_close(chunked, one,
                     mshape.to_string() + " layout " + layout + " recompute " + nn::to_string(r),
                     1e-5);
      }
    }
  }
}

// The metrics' sums (plain cross-entropy, z-loss, token count) of a chunked head are those of one
// chunk.
TEST(LossChunks, MetricSumsEqualOneChunk) {
  std::vector<float> sums[2];
  for (int i = 0; i < 2; ++i) {
    nn::TransformerConfig c = config_of(Kind::dense, nn::Recompute::none);
    c.label_smoothing = 0.1;
    c.z_loss = 1e-3;
    c.loss_chunks = i == 0 ? 1 : 2;
    Graph g;
    nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true, /*seed=*/5);
    auto p = lower(g, single_processor_mesh(), LayoutRules());
    for (const auto& t : p->run(feeds_of(m, c), {m.loss, m.loss_sum, m.cross_entropy_sum,
                                                 m.z_loss_sum, m.token_count}))
      sums[i].push_back(static_cast<float>(t.at(0)));
  }
  for (size_t k = 0; k < sums[0].size(); ++k)
    EXPECT_NEAR(sums[1][k], sums[0][k], 1e-5 * std::fabs(sums[0][k]) + 1e-7) << "output " << k;
  EXPECT_GT(sums[0][3], 0.0f) << "z-loss";
}

TEST(Recompute, LowersThePeakOfLiveActivations) {
  // Longer sequences and more layers than the tiny model: activations dominate the peak.
  nn::TransformerConfig c = tiny_transformer();
  c.num_layers = 4;
  c.length = 32;
  std::int64_t peak[4] = {0, 0, 0, 0};
  for (auto r : {nn::Recompute::none, nn::Recompute::norms, nn::Recompute::attention,
                 nn::Recompute::layer}) {
    c.recompute = r;
    Graph g;
    nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true);
    optim::Adafactor opt;
    optim::minimize(m.loss, opt, optim::LearningRateSchedule());
    peak[static_cast<int>(r)] =
        analyze(g, MeshShape::parse("b:1"), LayoutRules())->counters().peak_bytes;
  }
  EXPECT_LT(peak[1], peak[0]) << "norms recompute";
  EXPECT_LT(peak[2], peak[1]) << "attention recompute";
  EXPECT_LT(peak[3], peak[2]) << "layer recompute";
}

namespace {

Program::Step plain_step(std::vector<int> reads, std::vector<int> writes) {
  return synthetic_step(reduction_wait_kind(), std::move(reads), std::move(writes));
}

}  // namespace

// A segment that replays only some of its forward steps (`norms`: the norm, not the projections
// that read it): the backward's copies are those steps alone, even where it reads the outputs of
// the others.
TEST(Recompute, OnlyReplayableStepsAreCopied) {
  // 0: the norm (replay) reads the kept input 0, writes 1; 1: a projection (kept) reads 1 and
  // writes 2; 2: a step outside the segment reads 2; 3: the segment's backward reads 1 and 2.
  const std::vector<Program::Step> steps = {plain_step({0}, {1}), plain_step({1}, {2}),
                                            plain_step({2}, {3}), plain_step({1, 2}, {4})};
  const std::vector<RecomputeTag> tags = {{0, false, true}, {0, false, false}, {}, {0, true, true}};
  const RecomputePlan plan = plan_recomputation(steps, tags, 5);
  EXPECT_EQ(plan.source, (std::vector<int>{0, 1, 2, 0, 3}));
  EXPECT_EQ(plan.copy, (std::vector<bool>{false, false, false, true, false}));
  // Nothing replayable: nothing copied, every output kept.
  const std::vector<RecomputeTag> kept = {
      {0, false, false}, {0, false, false}, {}, {0, true, true}};
  EXPECT_EQ(plan_recomputation(steps, kept, 5).source, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Recompute, BufferDeathsFollowEachValue) {
  const auto step = plain_step;
  // 0 writes 1; 1 reads 1 writes 2; 2 writes 1 again (a recomputation); 3 reads 1 and 2.
  const std::vector<Program::Step> steps = {step({}, {1}), step({1}, {2}), step({}, {1}),
                                            step({1, 2}, {3})};
  const auto deaths = buffer_deaths(steps, 4, {0}, {3});
  ASSERT_EQ(deaths.size(), 4u);
  EXPECT_EQ(deaths[0], (std::vector<int>{0}));  // fed, never read
  EXPECT_EQ(deaths[1], (std::vector<int>{1}));  // the first value of 1
  EXPECT_TRUE(deaths[2].empty());
  EXPECT_EQ(deaths[3], (std::vector<int>{1, 2}));  // 3 lives to the end
}
