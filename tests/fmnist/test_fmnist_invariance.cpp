// mtk-fmnist's model trained for a few steps on real Fashion-MNIST images: the losses and the
// weights on a mesh, with the image split in height and width, the channels split, and both, equal
// the one-processor run (1e-5 of the largest value), with Adam and with SGD.
#include <mtk/parallel/mesh.hpp>

#include <gtest/gtest.h>

#include "fmnist_model.hpp"
#include "mtk_test_util.hpp"
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

namespace mtk::fmnist {
namespace {

const Dataset* data() {
  static const Dataset* d = [] {
    return std::filesystem::exists(std::string(kDefaultDataDir) + "/train-images-idx3-ubyte.gz")
               ? new Dataset(read_fashion_mnist(kDefaultDataDir))
               : nullptr;
  }();
  return d;
}

ModelConfig small(const std::string& optimizer) {
  ModelConfig c;
  c.batch = 8;
  c.eval_batch = 16;
  c.c1 = 4;
  c.c2 = 8;
  c.hidden = 16;
  c.optimizer = optimizer;
  // Adam moves every weight by up to lr whatever its gradient's size, so a gradient that is zero up
  // to rounding moves by a rounding-dependent amount: a small lr keeps that under the tolerance.
  c.lr = optimizer == "adam" ? 0.001 : 0.05;
  return c;
}

struct TrainedRun {
  std::vector<double> losses;
  std::vector<HostTensor> weights;
  std::vector<std::string> names;
  double eval_loss = 0;
};

TrainedRun train(const ModelConfig& c, const Mesh& mesh, const LayoutRules& rules) {
  Trainer trainer(c, ProgramOptions(), mesh, rules);
  TrainedRun r;
  const auto order = epoch_order(64, c.seed, 0);
  for (std::int64_t s = 0; s < 3; ++s) {
    const std::vector<std::int64_t> batch(order.begin() + s * c.batch,
                                          order.begin() + (s + 1) * c.batch);
    r.losses.push_back(trainer.step(data()->train_images, data()->train_labels, batch).loss);
  }
  r.eval_loss = trainer.evaluate(data()->test_images, data()->test_labels, 32).loss;
  for (const auto& name : trainer.program().variable_names()) {
    r.names.push_back(name);
    r.weights.push_back(trainer.program().variable_value(name));
  }
  return r;
}

// The rules of `text` whose mesh dim `mesh` has.
LayoutRules rules_on(const std::string& text, const MeshShape& mesh) {
  std::vector<std::pair<std::string, std::string>> kept;
  const LayoutRules all = LayoutRules::parse(text);
  for (const auto& [dim, axis] : all.rules())
    for (int a = 0; a < mesh.ndims(); ++a)
      if (mesh[a].name == axis)
        kept.emplace_back(dim, axis);
  return LayoutRules(kept);
}

MeshShape world_mesh() {
  switch (test::world_size()) {
    case 1:
      return MeshShape::parse("rows:1;cols:1");
    case 2:
      return MeshShape::parse("rows:2;cols:1");
    case 4:
      return MeshShape::parse("rows:2;cols:2");
    default:
      return MeshShape::parse("rows:2;cols:2;batch:" + std::to_string(test::world_size() / 4));
  }
}

void expect_same(const TrainedRun& got, const TrainedRun& want, const std::string& where) {
  ASSERT_EQ(got.losses.size(), want.losses.size());
  for (size_t s = 0; s < want.losses.size(); ++s)
    EXPECT_NEAR(got.losses[s], want.losses[s], 1e-5 * std::fabs(want.losses[s]))
        << where << ": loss of step " << s + 1;
  EXPECT_NEAR(got.eval_loss, want.eval_loss, 1e-5 * want.eval_loss) << where << ": test loss";
  ASSERT_EQ(got.names, want.names);
  for (size_t v = 0; v < want.weights.size(); ++v) {
    double scale = 0, diff = 0;
    for (std::int64_t e = 0; e < want.weights[v].size(); ++e) {
      scale = std::max(scale, std::fabs(want.weights[v].at(e)));
      diff = std::max(diff, std::fabs(got.weights[v].at(e) - want.weights[v].at(e)));
    }
    EXPECT_LE(diff, 1e-5 * std::max(scale, 1e-6))
        << where << ": variable " << want.names[v] << " differs by " << diff << " (scale " << scale
        << ")";
  }
}

class FmnistLayouts : public ::testing::TestWithParam<std::string> {};

TEST_P(FmnistLayouts, TrainingEqualsOneProcessor) {
  if (data() == nullptr)
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed at " << kDefaultDataDir;
  const ModelConfig c = small(GetParam());
  static const Mesh one(MeshShape::parse("rows:1"), MPI_COMM_SELF);
  const TrainedRun want = train(c, one, LayoutRules());
  ASSERT_EQ(want.losses.size(), 3u);
  const MeshShape shape = world_mesh();
  const Mesh mesh(shape, MPI_COMM_WORLD);
  for (const std::string layout : {"hb:rows;wb:cols;b:batch", "c1:rows;hidden:cols;b:batch",
                                   "hb:rows;c2:cols;c1:batch", "wb:rows;hidden:cols;hb:batch"}) {
    const LayoutRules rules = rules_on(layout, shape);
    expect_same(train(c, mesh, rules), want,
                GetParam() + " on " + shape.to_string() + " under \"" + rules.to_string() + "\"");
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, FmnistLayouts, ::testing::Values("adam", "sgd"));

}  // namespace
}  // namespace mtk::fmnist
