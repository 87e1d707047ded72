// The gradient norm training logs (optim::global_norm of minimize()'s gradients): on every mesh
// and layout of this rank count it equals the host's norm of known gradients and a Transformer's
// norm on one processor; replicated slices count once; asking for it changes no step.

#include <mtk/nn/nn.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include <cmath>

using namespace mtk;
using namespace mtk::test;

namespace {

// A loss whose gradients are the variables themselves: 0.5 * sum of their squares.
struct KnownGradients {
  Graph g;
  Tensor norm;
  std::vector<std::string> names;

  KnownGradients() {
    const std::vector<std::pair<std::string, Shape>> vars = {
        {"split_rows", Shape{{"rows", 8}, {"cols", 4}}},
        {"split_cols", Shape{{"cols", 4}, {"wide", 8}}},
        {"replicated", Shape{{"whole", 8}}},
        {"scalar", Shape()}};
    Tensor loss;
    for (size_t k = 0; k < vars.size(); ++k) {
      const Tensor v = variable(g, vars[k].first, vars[k].second,
                                Initializer::uniform(-1, 1, static_cast<std::uint64_t>(k + 1)));
      const Tensor term = multiply(reduce_sum(square(v)), 0.5);
      loss = loss.valid() ? loss + term : term;
      names.push_back(vars[k].first);
    }
    optim::Sgd sgd;
    optim::minimize(loss, sgd, optim::LearningRateSchedule(), &norm);
  }
};

TEST(GradientNorm, EqualsTheHostNormOnEveryMeshAndLayout) {
  for (const auto& mshape : meshes_of_size(world_size()))
    for (const std::string layout :
         {"", "rows:@0", "rows:@0;wide:@1", "cols:@0;whole:@1", "rows:@1;wide:@0;whole:@0"}) {
      KnownGradients k;
      const Mesh mesh(mshape, MPI_COMM_WORLD);
      auto program = lower(k.g, mesh, instantiate(layout, mshape));
      double sum = 0;  // the gradients are the variables before the update
      for (const auto& name : k.names) {
        const HostTensor v = program->variable_value(name);
        for (std::int64_t e = 0; e < v.size(); ++e)
          sum += v.at(e) * v.at(e);
      }
      const double got = program->run({}, {k.norm})[0].at(0);
      EXPECT_NEAR(got, std::sqrt(sum), 1e-6 * std::sqrt(sum))
          << "mesh " << mshape.to_string() << " layout '" << layout << "'";
    }
}

// The training graph of the tiny Transformer with Adafactor; returns the norm and the loss.
std::vector<double> transformer_step(bool moe, const Mesh& mesh, const std::string& layout,
                                     bool with_norm, int steps = 1) {
  Graph g;
  const nn::TransformerConfig c = tiny_transformer(moe);
  const nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true);
  optim::Adafactor opt;
  Tensor norm;
  optim::minimize(m.loss, opt, optim::LearningRateSchedule(), with_norm ? &norm : nullptr);
  const std::int64_t v = c.vocab_size - 1;
  const auto feeds = lm_feeds(
      m, c, [v](std::int64_t b, std::int64_t l) { return (b * 7 + l * 3) % v + 1; },
      [v](std::int64_t b, std::int64_t l) { return (b * 5 + l * l) % v + 1; });
  auto program = lower(g, mesh, instantiate(layout, mesh.shape()));
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) {
    const auto r = program->run(
        feeds, with_norm ? std::vector<Tensor>{m.loss, norm} : std::vector<Tensor>{m.loss});
    for (const auto& t : r)
      out.push_back(t.at(0));
  }
  return out;
}

TEST(GradientNorm, TransformerOnEveryMeshAsOnOneProcessor) {
  for (const bool moe : {false, true}) {
    const std::vector<std::string> layouts =
        moe ? std::vector<std::string>{"batch:@0;experts:@0", "experts:@0;vocab:@1"}
            : std::vector<std::string>{"batch:@0", "vocab:@0;d_ff:@0;heads:@0",
                                       "batch:@0;vocab:@1;d_ff:@1;heads:@1"};
    const auto want = transformer_step(moe, single_processor_mesh(), "", true);
    ASSERT_GT(want[1], 0);
    for (const auto& mshape : meshes_of_size(world_size()))
      for (const auto& layout : layouts) {
        const Mesh mesh(mshape, MPI_COMM_WORLD);
        const auto got = transformer_step(moe, mesh, layout, true);
        EXPECT_NEAR(got[1], want[1], 1e-5 * want[1])
            << (moe ? "moe" : "dense") << " on " << mshape.to_string() << " layout " << layout;
      }
  }
}

TEST(GradientNorm, AskingForItChangesNoStep) {
  const Mesh mesh(MeshShape::parse("batch:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const auto with = transformer_step(false, mesh, "batch:@0", true, 3);
  const auto without = transformer_step(false, mesh, "batch:@0", false, 3);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(with[static_cast<size_t>(2 * i)], without[static_cast<size_t>(i)]) << "step " << i;
}

}  // namespace
