// Fine-tuning's checkpoint side (mtk/checkpoint/init_from.hpp): restore_variables() loads the
// chosen trained variables onto another mesh and layout and leaves the rest (excluded weights,
// optimizer slots, the step) as initialised; a model of other shapes is refused naming every
// mismatching variable with both shapes; exclusion patterns; the origin record.

#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/checkpoint/init_from.hpp>

#include <gtest/gtest.h>
#include <mpi.h>

#include "../mtk_test_util.hpp"
#include "../temp_dir.hpp"
#include "ckpt_test_model.hpp"
#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

using Values = std::map<std::string, std::vector<float>>;

Values all_values(Program& p) {
  Values out;
  for (const auto& n : p.variable_names())
    out[n] = p.variable_value(n).values<float>();
  return out;
}

// The trainable variables of the test model (its graph's), in creation order.
std::vector<std::string> trained(const TinyModel& m) {
  std::vector<std::string> names;
  for (int i : m.graph->variable_ops())
    if (m.graph->variable_attrs(i).trainable)
      names.push_back(m.graph->op(i).name);
  return names;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A model trained 3 steps on the checkpoint test mesh (layout A), saved: its values and path.
std::string train_and_save(const TempDir& dir, Values* values) {
  Mesh mesh(checkpoint_test_mesh(world_size()), MPI_COMM_WORLD);
  TinyModel a = make_tiny_model(mesh, rules_a());
  for (int s = 0; s < 3; ++s)
    a.train_step();
  *values = all_values(*a.program);
  return CheckpointManager(dir.path(), 1, mesh).save(*a.program, {});
}

}  // namespace

TEST(InitFrom, PatternsMatchWholeNamesAndTailsAfterASlash) {
  EXPECT_TRUE(weight_pattern_matches("embedding*", "decoder/embedding"));
  EXPECT_TRUE(weight_pattern_matches("decoder/embedding", "decoder/embedding"));
  EXPECT_TRUE(weight_pattern_matches("decoder/*", "decoder/layer_0/ffn/wi"));
  EXPECT_TRUE(weight_pattern_matches("layer_0/*", "decoder/layer_0/ffn/wi"));
  EXPECT_TRUE(weight_pattern_matches("*/ffn/w?", "decoder/layer_0/ffn/wo"));
  EXPECT_FALSE(weight_pattern_matches("embedding", "decoder/embedding_x"));
  EXPECT_FALSE(weight_pattern_matches("coder/embedding", "decoder/embedding"));
  EXPECT_FALSE(weight_pattern_matches("layer_1/*", "decoder/layer_0/ffn/wi"));

  const std::vector<std::string> names = {"layer_0/w1", "layer_0/b1", "layer_0/w2", "out_bias"};
  const WeightSelection s = select_weights(names, {"w*", "out_bias"}, "test");
  EXPECT_EQ(s.loaded, std::vector<std::string>({"layer_0/b1"}));
  EXPECT_EQ(s.excluded, std::vector<std::string>({"layer_0/w1", "layer_0/w2", "out_bias"}));
  try {
    select_weights(names, {"w*", "embeding"}, "mtk-lm1b train");
    FAIL() << "a pattern that matches nothing was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "--init-exclude 'embeding' matches none")) << e.what();
    EXPECT_TRUE(has(e.what(), "layer_0/w1, layer_0/b1")) << e.what();
  }
}

TEST(InitFrom, ExcludedVariablesSlotsAndStepKeepTheirInitialValuesOnAnotherMesh) {
  TempDir dir(MPI_COMM_WORLD);
  Values saved;
  const std::string path = train_and_save(dir, &saved);
  for (const auto& shape : meshes_of_size(world_size())) {
    Mesh mesh(shape, MPI_COMM_WORLD);
    TinyModel b = make_tiny_model(mesh, rules_b());
    const Values initial = all_values(*b.program);
    const WeightSelection s = select_weights(trained(b), {"w2", "scale"}, "test");
    ASSERT_EQ(s.excluded, std::vector<std::string>({"layer_0/w2", "scale"}));
    CheckpointMetadata meta;
    restore_variables(*b.program, path, s.loaded, &meta);
    EXPECT_EQ(meta.step, 3);
    EXPECT_EQ(b.program->step(), 0) << "the step starts afresh";
    const Values now = all_values(*b.program);
    for (const auto& [name, v] : now) {
      const bool loaded = std::find(s.loaded.begin(), s.loaded.end(), name) != s.loaded.end();
      // Loaded: bitwise the saved values; everything else (excluded weights, the optimizer's
      // slots, the step counter) as the initializers left it.
      EXPECT_EQ(v, loaded ? saved.at(name) : initial.at(name))
          << name << " on " << shape.to_string();
      if (loaded) {
        EXPECT_NE(v, initial.at(name)) << name << ": the test needs trained values to differ";
      }
    }
    EXPECT_NE(saved.at("layer_0/w1/rms"), initial.at("layer_0/w1/rms"));
  }
}

TEST(InitFrom, ShapeMismatchNamesEveryVariableWithBothShapes) {
  TempDir dir(MPI_COMM_WORLD);
  Values saved;
  const std::string path = train_and_save(dir, &saved);
  Mesh mesh(checkpoint_test_mesh(world_size()), MPI_COMM_WORLD);
  TinyModel wider = make_tiny_model(mesh, rules_b(), /*d_ff_size=*/24);
  const Values before = all_values(*wider.program);
  try {
    restore_variables(*wider.program, path, trained(wider));
    FAIL() << "restoring d_ff=12 into d_ff=24 succeeded";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(has(msg, "3 variables do not match")) << msg;
    EXPECT_TRUE(has(msg, "'layer_0/w1': checkpoint " + path +
                             " stores shape [d_model=8, d_ff=12], the program expects "
                             "[d_model=8, d_ff=24]"))
        << msg;
    EXPECT_TRUE(has(msg, "'layer_0/b1'")) << msg;
    EXPECT_TRUE(has(msg, "[d_ff=12], the program expects [d_ff=24]")) << msg;
    EXPECT_TRUE(has(msg, "'layer_0/w2'")) << msg;
    EXPECT_TRUE(has(msg, "[d_ff=12, vocab=16], the program expects [d_ff=24, vocab=16]")) << msg;
    EXPECT_FALSE(has(msg, "out_bias")) << msg;
  }
  EXPECT_EQ(all_values(*wider.program), before) << "a refused restore changes nothing";
  // Leaving the mismatching variables out loads the rest.
  const WeightSelection s = select_weights(trained(wider), {"layer_0/*"}, "test");
  restore_variables(*wider.program, path, s.loaded);
  EXPECT_EQ(all_values(*wider.program).at("out_bias"), saved.at("out_bias"));
}

TEST(InitFrom, OriginIsRecordedInTheMetadataAndReadsBack) {
  TempDir dir(MPI_COMM_WORLD);
  Values saved;
  const std::string source = train_and_save(dir, &saved);
  WeightsOrigin origin;
  origin.checkpoint = source;
  origin.step = 3;
  origin.manifest_sha256 = checkpoint_manifest_sha256(source);
  origin.exclude = {"w*", "it's \"odd\""};
  origin.excluded = {"layer_0/w1", "layer_0/w2"};
  EXPECT_EQ(origin.manifest_sha256.size(), 64u);

  Mesh mesh(checkpoint_test_mesh(world_size()), MPI_COMM_WORLD);
  TinyModel b = make_tiny_model(mesh, rules_b());
  CheckpointMetadata md;
  md.step = 0;
  md.init_from = origin.to_yaml();
  TempDir out(MPI_COMM_WORLD);
  const std::string path = CheckpointManager(out.path(), 1, mesh).save(*b.program, md);
  const CheckpointInfo info = checkpoint_info(path);
  const WeightsOrigin back = WeightsOrigin::parse(info.metadata.init_from, "test");
  EXPECT_EQ(back.checkpoint, source);
  EXPECT_EQ(back.step, 3);
  EXPECT_EQ(back.manifest_sha256, origin.manifest_sha256);
  EXPECT_EQ(back.exclude, origin.exclude);
  EXPECT_EQ(back.excluded, origin.excluded);
  EXPECT_TRUE(has(format_checkpoint_info(info), "init from")) << format_checkpoint_info(info);
  EXPECT_TRUE(verify_checkpoint(path, MPI_COMM_WORLD).ok);
  // A checkpoint of a run that started from its initializers records nothing.
  EXPECT_EQ(checkpoint_info(source).metadata.init_from, "");
}
