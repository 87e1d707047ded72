// Microbatches (train.microbatches, nn::build_training): a batch run as k slices in series, their
// gradients summed before one optimizer step, trains as the whole batch does — losses and weights
// within float32 reassociation (1e-5 of the scale; the slices' sums add in another order) of
// k = 1, on every mesh and layout, each also against one processor; data-parallel gradients are
// allreduced once per batch, not per slice; a run checkpointed with one k resumes with another;
// and slices lower the peak of live activations.
// The chunked loss head (model.loss_chunks) is here too: it trains as one chunk does within the
// same tolerance, with and without recomputation and microbatches, and lowers the peak.

#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include "temp_dir.hpp"
#include "training_fixtures.hpp"
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;
namespace fs = std::filesystem;

namespace {

// The tiny model with a batch every slice of which still splits over 8 ranks.
nn::TransformerConfig config(bool moe = false) {
  nn::TransformerConfig c = tiny_transformer(moe);
  c.batch = 32;
  return c;
}

struct Job {
  Graph g;
  nn::TrainingGraph t;
  std::unique_ptr<Program> program;
  std::map<int, HostTensor> feeds;
};

std::unique_ptr<Job> make_job(const nn::TransformerConfig& c, int k, const Mesh& mesh,
                              const LayoutRules& rules) {
  auto j = std::make_unique<Job>();
  optim::Adafactor opt;
  j->t = nn::build_training(j->g, c, k, opt, test_learning_rate(), /*seed=*/5);
  j->feeds = lm_feeds(
      j->t.model, c, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) {
        return b % 5 == 4 && l > 5 ? 0 : (b * 7 + l) % 31 + 1;
      });
  j->program = lower(j->g, mesh, rules);
  return j;
}

struct Trained {
  std::vector<float> losses, norms;
  std::vector<float> weights;  // every variable's global value after the last step
};

void run_steps(Job& j, int steps, Trained& t) {
  for (int s = 0; s < steps; ++s) {
    const auto out = j.program->run(j.feeds, {j.t.model.loss, j.t.gradient_norm});
    t.losses.push_back(static_cast<float>(out[0].at(0)));
    t.norms.push_back(static_cast<float>(out[1].at(0)));
  }
}

void read_weights(Job& j, Trained& t) {
  t.weights = global_weights(*j.program);
}

Trained train(const nn::TransformerConfig& c, int k, const Mesh& mesh, const LayoutRules& rules,
              int steps = 3) {
  auto j = make_job(c, k, mesh, rules);
  Trained t;
  run_steps(*j, steps, t);
  read_weights(*j, t);
  return t;
}

// The stated tolerance: float32 reassociation, 1e-5 of the largest weight and of each loss (the
// gradient norms, sums of squares, 1e-4).
void expect_close_with_norms(const Trained& a, const Trained& b, const std::string& what,
                             double tol = 1e-5) {
  expect_close(a, b, what, tol);
  ASSERT_EQ(a.norms.size(), b.norms.size()) << what;
  for (size_t s = 0; s < a.norms.size(); ++s)
    EXPECT_NEAR(a.norms[s], b.norms[s], 10 * tol * std::fabs(b.norms[s]))
        << what << " gradient norm, step " << s;
}

const std::vector<std::string> kLayouts = {"batch:@0", "vocab:@0;d_ff:@0;heads:@0;batch:@1"};

}  // namespace

TEST(Microbatches, LossesAndWeightsEqualTheWholeBatch) {
  const auto c = config();
  const Trained one = train(c, 1, single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : kLayouts) {
      const auto rules = instantiate(layout, mshape);
      const std::string what = mshape.to_string() + " layout " + layout;
      const Trained whole = train(c, 1, mesh, rules);
      expect_close_with_norms(whole, one, what + ": k = 1 against one processor");
      for (int k : {2, 4}) {
        const Trained sliced = train(c, k, mesh, rules);
        expect_close_with_norms(sliced, whole, what + ": k = " + std::to_string(k));
      }
    }
  }
}

TEST(Microbatches, WithRecomputationAndMixtureOfExperts) {
  // Recompute on top of slices is bitwise the slices alone; MoE trains (its capacity is per
  // slice, so it is compared with k = 1 only loosely).
  auto c = config();
  const Mesh mesh(MeshShape::parse("b:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const auto rules = LayoutRules::parse("batch:b");
  const Trained plain = train(c, 2, mesh, rules);
  c.recompute = nn::Recompute::layer;
  const Trained recomputed = train(c, 2, mesh, rules);
  EXPECT_EQ(plain.weights, recomputed.weights);
  EXPECT_EQ(plain.losses, recomputed.losses);
  const auto moe = config(/*moe=*/true);
  const Trained moe1 = train(moe, 1, mesh, rules, 2);
  const Trained moe2 = train(moe, 2, mesh, rules, 2);
  EXPECT_NEAR(moe2.losses[0], moe1.losses[0], 1e-2 * std::fabs(moe1.losses[0]));
}

TEST(Microbatches, GradientsAreReducedOncePerBatch) {
  if (world_size() < 2)
    GTEST_SKIP() << "needs data parallelism";
  const auto c = config();
  const Mesh mesh(MeshShape::parse("b:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const auto rules = LayoutRules::parse("batch:b");
  auto whole = make_job(c, 1, mesh, rules);
  auto sliced = make_job(c, 4, mesh, rules);
  // The weight gradients dominate the bytes reduced: reduced per slice they would be 4 times.
  const auto a = whole->program->counters().comm_bytes.at(Collective::allreduce);
  const auto b = sliced->program->counters().comm_bytes.at(Collective::allreduce);
  EXPECT_LT(static_cast<double>(b), 1.1 * static_cast<double>(a))
      << "allreduce bytes per step: k = 4 " << b << ", k = 1 " << a;
}

TEST(Microbatches, ResumeAcrossAChangeOfK) {
  // 2 steps with k = 2, a checkpoint, 2 more steps with k = 4: the run of 4 steps with k = 1.
  const auto c = config();
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    const auto rules = instantiate(kLayouts[1], mshape);
    const std::string what = mshape.to_string();
    const Trained straight = train(c, 1, mesh, rules, 4);
    TempDir dir(MPI_COMM_WORLD);
    const std::string path = dir.path() + "/step-2";
    Trained resumed;
    {
      auto first = make_job(c, 2, mesh, rules);
      run_steps(*first, 2, resumed);
      write_checkpoint_directory(*first->program, path, CheckpointMetadata());
    }
    auto second = make_job(c, 4, mesh, rules);
    restore_checkpoint(*second->program, path);
    EXPECT_EQ(second->program->step(), 2) << what;
    run_steps(*second, 2, resumed);
    read_weights(*second, resumed);
    expect_close_with_norms(resumed, straight, what + ": k = 2 then 4 against k = 1");
  }
}

TEST(Microbatches, SlicesLowerThePeakOfLiveActivations) {
  nn::TransformerConfig c = tiny_transformer();
  c.num_layers = 4;
  c.length = 32;
  c.batch = 16;
  std::int64_t peak[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    Graph g;
    optim::Adafactor opt;
    nn::build_training(g, c, 1 << i, opt, optim::LearningRateSchedule());
    peak[i] = analyze(g, MeshShape::parse("b:1"), LayoutRules())->counters().peak_bytes;
  }
  EXPECT_LT(peak[1], peak[0]);
  EXPECT_LT(peak[2], peak[1]);
}

namespace {

// The encoder-decoder with one embedding table shared by encoder and decoder, trained 3 steps.
Trained train_shared_embedding(int k, const Mesh& mesh, const LayoutRules& rules) {
  nn::TransformerConfig c = tiny_transformer(/*moe=*/false, /*encoder_decoder=*/true);
  c.batch = 32;
  c.shared_embedding = true;
  Job j;
  optim::Adafactor opt;
  j.t = nn::build_training(j.g, c, k, opt, test_learning_rate(), /*seed=*/5);
  j.feeds = lm_feeds(
      j.t.model, c, [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) { return (b * 7 + l * 3 + 4) % 31 + 1; });
  const Shape s{{"batch", c.batch}, {"length", c.length}};
  std::vector<std::int32_t> in, seg, pos;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      in.push_back(static_cast<std::int32_t>((b * 3 + l * 11 + 2) % 31 + 1));
      seg.push_back(1);
      pos.push_back(static_cast<std::int32_t>(l));
    }
  j.feeds[j.t.model.encoder_inputs.id()] = HostTensor::ints(s, in);
  j.feeds[j.t.model.encoder_segments.id()] = HostTensor::ints(s, seg);
  j.feeds[j.t.model.encoder_positions.id()] = HostTensor::ints(s, pos);
  j.program = lower(j.g, mesh, rules);
  Trained t;
  run_steps(j, 3, t);
  read_weights(j, t);
  return t;
}

}  // namespace

// Tables read only by gathers (token and position embeddings; here one table shared by encoder
// and decoder) get their gradient after the last slice: each slice keeps its rows' gradient
// (tokens x d_model) and the table-sized scatters run once every slice is done, so no table-sized
// sum lives through the slices. Training stays within the tolerance of k = 1.
TEST(Microbatches, EmbeddingTablesAreScatteredAfterTheLastSlice) {
  {
    Graph g;
    optim::Adafactor opt;
    nn::build_training(g, config(), 4, opt, test_learning_rate(), /*seed=*/5);
    int last_gather = -1, scatters = 0;
    for (int i = 0; i < g.num_ops(); ++i)
      if (std::string(g.op(i).kind()) == "gather")
        last_gather = i;
    for (int i = 0; i < g.num_ops(); ++i)
      if (std::string(g.op(i).kind()) == "scatter_add" ||
          std::string(g.op(i).kind()) == "scatter_add_into") {
        ++scatters;
        EXPECT_GT(i, last_gather) << "a table's scatter before the last slice's forward";
      }
    EXPECT_GE(scatters, 4);  // at least the token table's, once per slice (the later ones into
                             // the table's running sum)
  }
  const Mesh mesh(MeshShape::parse("b:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const auto rules = LayoutRules::parse("batch:b");
  expect_close_with_norms(train_shared_embedding(2, mesh, rules),
                          train_shared_embedding(1, mesh, rules),
                          "encoder-decoder, shared embedding: k = 2");
}

TEST(Microbatches, AKThatDoesNotDivideTheBatchIsAnError) {
  Graph g;
  optim::Adafactor opt;
  auto c = config();
  try {
    nn::build_training(g, c, 3, opt, optim::LearningRateSchedule());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train.microbatches = 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("model.batch = 32"), std::string::npos) << e.what();
  }
}

// model.loss_chunks: the logits and the cross-entropy in slices of `length`, each recomputed in
// the backward. The same loss summed in another order: losses and weights within 1e-5 (the
// microbatches' tolerance) of one chunk, on every mesh and layout (data and model parallel, the
// vocabulary split), with recompute none and layer, and with microbatches.
TEST(LossChunks, LossesAndWeightsEqualOneChunk) {
  auto c = config();
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : kLayouts) {
      const auto rules = instantiate(layout, mshape);
      for (auto r : {nn::Recompute::none, nn::Recompute::layer}) {
        c.recompute = r;
        c.loss_chunks = 1;
        const Trained one = train(c, 1, mesh, rules);
        for (int chunks : r == nn::Recompute::none ? std::vector<int>{2, 4} : std::vector<int>{4}) {
          c.loss_chunks = chunks;
          const std::string what = mshape.to_string() + " layout " + layout + " recompute " +
                                   nn::to_string(r) + " loss_chunks " + std::to_string(chunks);
          expect_close_with_norms(train(c, 1, mesh, rules), one, what);
        }
      }
      c.recompute = nn::Recompute::none;
      c.loss_chunks = 4;
      const Trained both = train(c, 2, mesh, rules);
      c.loss_chunks = 1;
      expect_close_with_norms(both, train(c, 1, mesh, rules),
                              mshape.to_string() + " layout " + layout + ": k = 2, loss_chunks 4");
    }
  }
}

TEST(LossChunks, OnASplitLength) {
  // Local attention lets a layout split `length` (docs/spatial.md); each slice of the head is
  // split over that mesh dim too (32 / 4 = 8 positions, divisible by 8 ranks).
  auto c = config();
  c.batch = 8;
  c.length = 32;
  c.attention_window = 4;
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    const auto rules = instantiate("length:@0", mshape);
    c.loss_chunks = 1;
    const Trained one = train(c, 1, mesh, rules, 2);
    c.loss_chunks = 4;
    expect_close_with_norms(train(c, 1, mesh, rules, 2), one, mshape.to_string() + " length:@0");
  }
}

TEST(LossChunks, LowerThePeakWhenTheLogitsDominate) {
  // A vocabulary of 2048 and 64 positions: the logits are most of the peak. With one chunk their
  // gradient takes their buffer (in-place elementwise steps), so one logits-sized buffer is held,
  // not two: chunks cut at least 30% (4 chunks: 39%, 46% with layer recompute). The pool's peak
  // (peak_bytes) keeps a buffer per size, so it need not fall with every more chunk; the most
  // live bytes do not rise.
  nn::TransformerConfig c = tiny_transformer();
  c.vocab_size = 2048;
  c.length = 64;
  for (auto r : {nn::Recompute::none, nn::Recompute::layer}) {
    c.recompute = r;
    Counters n[3];
    for (int i = 0; i < 3; ++i) {
      c.loss_chunks = 1 << (2 * i);  // 1, 4, 16
      Graph g;
      optim::Adafactor opt;
      nn::build_training(g, c, 1, opt, optim::LearningRateSchedule());
      n[i] = analyze(g, MeshShape::parse("b:1"), LayoutRules())->counters();
    }
    EXPECT_LT(n[1].peak_bytes, 0.7 * n[0].peak_bytes) << nn::to_string(r);
    EXPECT_LT(n[2].peak_bytes, 0.7 * n[0].peak_bytes) << nn::to_string(r);
    EXPECT_LE(n[2].live_peak_bytes, n[1].live_peak_bytes) << nn::to_string(r);
  }
}

TEST(LossChunks, ChunksThatDoNotDivideTheLengthAreAnError) {
  for (std::int64_t chunks : {3, 0}) {
    auto c = config();
    c.loss_chunks = chunks;
    Graph g;
    optim::Adafactor opt;
    try {
      nn::build_training(g, c, 1, opt, optim::LearningRateSchedule());
      FAIL() << "no error for " << chunks;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("model.loss_chunks = " + std::to_string(chunks)), std::string::npos) << m;
      EXPECT_NE(m.find("model.length = 8"), std::string::npos) << m;
    }
  }
}
