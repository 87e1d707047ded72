// YAML configuration: meshes and layouts written as maps or strings; dotted keys; overrides.

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/config/training_config.hpp>

#include <gtest/gtest.h>

using namespace mtk;

TEST(Config, MeshAndLayoutFromYamlMapsAndStrings) {
  auto c = Config::from_string(
      "mesh: {batch: 4, model: 2}\n"
      "layout:\n  batch: batch\n  d_ff: model\n"
      "other:\n  mesh: \"rows:2;cols:3\"\n  layout: \"vocab:cols\"\n");
  EXPECT_EQ(c.mesh_shape().to_string(), "batch:4;model:2");
  EXPECT_EQ(c.layout_rules().to_string(), "batch:batch;d_ff:model");
  EXPECT_EQ(c.mesh_shape("other.mesh").to_string(), "rows:2;cols:3");
  EXPECT_EQ(c.layout_rules("other.layout").mesh_dim_for("vocab"), "cols");
  EXPECT_EQ(c.keys(), (std::vector<std::string>{"mesh", "layout", "other"}));
}

TEST(Config, TypedValuesDefaultsAndOverrides) {
  auto c = Config::from_string("train:\n  steps: 100\n  lr: 0.01\n  shuffle: true\n");
  EXPECT_EQ(c.get_int("train.steps"), 100);
  EXPECT_DOUBLE_EQ(c.get_double("train.lr"), 0.01);
  EXPECT_TRUE(c.get_bool("train.shuffle"));
  EXPECT_EQ(c.get_int("train.batch", 8), 8);
  c.apply_override("train.steps=250");
  c.apply_override("model.d_model=512");
  EXPECT_EQ(c.get_int("train.steps"), 250);
  EXPECT_EQ(c.get_int("model.d_model"), 512);
  auto again = Config::from_string(c.dump());
  EXPECT_EQ(again.get_int("train.steps"), 250);
}

TEST(Config, BadInputNamesTheKeyAndOrigin) {
  auto c = Config::from_string("train:\n  steps: many\nmesh: {batch: 0}\n", "run.yaml");
  try {
    c.get_int("train.steps");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("run.yaml"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("train.steps"), std::string::npos);
  }
  EXPECT_THROW(c.get_int("train.missing"), Error);
  EXPECT_THROW(c.mesh_shape(), Error);
  EXPECT_THROW(Config::from_string("a: [1, 2\n"), Error);
  EXPECT_THROW(Config::from_file("/nonexistent/mtk.yaml"), Error);
  EXPECT_THROW(c.apply_override("novalue"), Error);
}

namespace {

// The message of the mtk::Error `fn` throws ("" when it throws none).
template <class F>
std::string error_of(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST(Config, CheckedSettingsNameKeyValueAndRange) {
  auto c = Config::from_string(
      "train: {steps: -5, log_every: 0, seed: 1.5, lr: 2.0, name: x, flag: maybe}\n"
      "checkpoint: {every: 0, keep: 4294967297, none: }\n",
      "run.yaml");
  auto steps = error_of([&] { c.get_int("train.steps", 10, 1, 1000); });
  EXPECT_TRUE(contains(steps, "run.yaml: train.steps = -5 is not an integer in [1, 1000]"))
      << steps;
  EXPECT_TRUE(contains(error_of([&] { c.get_int("train.log_every", 10, 1, 1000); }),
                       "train.log_every = 0"));
  EXPECT_TRUE(contains(error_of([&] { c.get_int("checkpoint.every", 10, 1, 1000); }),
                       "checkpoint.every = 0 is not an integer in [1, 1000]"));
  // No silent truncation: 2^32 + 1 is out of range, not 1.
  auto keep = error_of([&] { c.get_int("checkpoint.keep", 3, 1, 1000000); });
  EXPECT_TRUE(contains(keep, "checkpoint.keep = 4294967297 is not an integer in [1, 1000000]"))
      << keep;
  EXPECT_TRUE(contains(error_of([&] { c.get_int("train.seed", 1, 0, 100); }),
                       "train.seed = 1.5 is not an integer"));
  EXPECT_TRUE(contains(error_of([&] { c.get_double("train.lr", 0.1, 0.0, 1.0); }),
                       "train.lr = 2.0 is not a number in [0, 1]"));
  EXPECT_TRUE(contains(error_of([&] { c.get_bool_checked("train.flag", false); }),
                       "train.flag = maybe is not true or false"));
  EXPECT_TRUE(contains(error_of([&] {
                         c.get_string("train.name", "a", {"a", "b"});
                       }),
                       "train.name = 'x' is not one of a, b"));
  // A key written without a value is not the default.
  EXPECT_TRUE(contains(error_of([&] { c.get_int("checkpoint.none", 3, 1, 10); }),
                       "key 'checkpoint.none' has no value"));
  // Absent keys give the fallback; good values pass.
  EXPECT_EQ(c.get_int("train.absent", 7, 1, 10), 7);
  EXPECT_DOUBLE_EQ(c.get_double("train.lr", 0.1, 0.0, 5.0), 2.0);
  EXPECT_EQ(c.get_string("train.name", "a", {}), "x");
}

TEST(Config, OverridesNeedAValueAndKeepSections) {
  auto c = Config::from_string("train: {steps: 10, seed: 1}\nmesh: {batch: 2}\n", "run.yaml");
  auto empty = error_of([&] { c.apply_override("train.steps="); });
  EXPECT_TRUE(contains(empty, "'train.steps=' gives 'train.steps' no value")) << empty;
  EXPECT_TRUE(contains(error_of([&] { c.apply_override("train.steps=null"); }), "no value"));
  auto section = error_of([&] { c.apply_override("train=5"); });
  EXPECT_TRUE(contains(section, "would replace the section 'train' (steps, seed)")) << section;
  EXPECT_TRUE(contains(error_of([&] { c.apply_override("mesh=batch:2"); }), "use --mesh"));
  EXPECT_EQ(c.get_int("train.steps"), 10);  // the failed overrides changed nothing
  // Messages say a value came from the command line.
  c.apply_override("train.steps=-1");
  EXPECT_TRUE(contains(error_of([&] { c.get_int("train.steps", 1, 1, 5); }),
                       "run.yaml with --set train.steps: train.steps = -1"));
  // A map may replace a map, a quoted empty string is a value, set() may replace a section.
  c.apply_override("mesh={batch: 4}");
  EXPECT_EQ(c.mesh_shape().to_string(), "batch:4");
  c.apply_override("train.name=\"\"");
  EXPECT_EQ(c.get_string("train.name", "x"), "");
  c.set("mesh", "\"batch:1\"");
  EXPECT_EQ(c.mesh_shape().to_string(), "batch:1");
}

TEST(Config, SectionsAndConfigPaths) {
  auto c = Config::from_string("train: 5\neval: {a: 1}\n", "run.yaml");
  EXPECT_TRUE(contains(error_of([&] { c.require_section("train"); }),
                       "run.yaml: 'train' must be a section (a map of keys), not 5"));
  EXPECT_NO_THROW(c.require_section("eval"));
  EXPECT_NO_THROW(c.require_section("absent"));
  // A directory given as the config file says so (not "key 'data.dir' is missing").
  auto dir = error_of([] { Config::from_file("/tmp"); });
  EXPECT_TRUE(contains(dir, "the config file '/tmp' is a directory")) << dir;
  auto missing = error_of([] { Config::from_file("/nonexistent/mtk.yaml"); });
  EXPECT_TRUE(contains(missing, "'/nonexistent/mtk.yaml': No such file or directory")) << missing;
}

TEST(Config, ActivationDtypeIsFloat32OrBfloat16) {
  EXPECT_EQ(transformer_config_from(Config::from_string("model: {d_model: 64}\n", "m.yaml"))
                .activation_dtype,
            "float32");
  EXPECT_EQ(transformer_config_from(
                Config::from_string("model: {activation_dtype: bfloat16}\n", "m.yaml"))
                .contraction_precision(),
            Precision::bfloat16);
  const auto bad = error_of([] {
    transformer_config_from(Config::from_string("model: {activation_dtype: float16}\n", "m.yaml"));
  });
  EXPECT_TRUE(contains(bad,
                       "m.yaml: model.activation_dtype = 'float16' is not one of float32, "
                       "bfloat16"))
      << bad;
}

TEST(Config, VariableAndSlotDtypesAreFloat32OrBfloat16) {
  const auto defaults =
      config::read_training_settings(Config::from_string("train: {}\n", "t.yaml"));
  EXPECT_EQ(defaults.optimizer.variable_dtype, DType::float32);
  EXPECT_EQ(defaults.optimizer.slot_dtype, DType::float32);
  const auto s = config::read_training_settings(Config::from_string(
      "train: {optimizer: adam, variable_dtype: bfloat16, optimizer_slot_dtype: bfloat16}\n",
      "t.yaml"));
  EXPECT_EQ(s.optimizer.variable_dtype, DType::bfloat16);
  EXPECT_EQ(s.optimizer.slot_dtype, DType::bfloat16);
  const auto optimizer = config::make_optimizer(s.optimizer);
  EXPECT_EQ(optimizer->variable_dtype(), DType::bfloat16);
  EXPECT_EQ(optimizer->slot_dtype(), DType::bfloat16);
  // Written back, read again: the same.
  Config out = Config::from_string("{}\n", "out.yaml");
  config::write_training_settings(out, s);
  EXPECT_EQ(config::read_training_settings(out).optimizer.slot_dtype, DType::bfloat16);
  for (const char* key : {"variable_dtype", "optimizer_slot_dtype"}) {
    const auto bad = error_of([&] {
      config::read_training_settings(
          Config::from_string(std::string("train: {") + key + ": float16}\n", "t.yaml"));
    });
    EXPECT_TRUE(contains(
        bad, std::string("t.yaml: train.") + key + " = 'float16' is not one of float32, bfloat16"))
        << bad;
  }
}

TEST(Config, VariableRoundingIsNearestOrStochasticForBfloat16Variables) {
  const auto defaults =
      config::read_training_settings(Config::from_string("train: {}\n", "t.yaml"));
  EXPECT_EQ(defaults.optimizer.variable_rounding, Rounding::nearest);
  const auto s = config::read_training_settings(Config::from_string(
      "train: {variable_dtype: bfloat16, variable_rounding: stochastic}\n", "t.yaml"));
  EXPECT_EQ(s.optimizer.variable_rounding, Rounding::stochastic);
  EXPECT_EQ(config::make_optimizer(s.optimizer)->variable_rounding(), Rounding::stochastic);
  Config out = Config::from_string("{}\n", "out.yaml");
  config::write_training_settings(out, s);
  EXPECT_EQ(config::read_training_settings(out).optimizer.variable_rounding, Rounding::stochastic);
  const auto bad = error_of([] {
    config::read_training_settings(Config::from_string(
        "train: {variable_dtype: bfloat16, variable_rounding: up}\n", "t.yaml"));
  });
  EXPECT_TRUE(
      contains(bad, "t.yaml: train.variable_rounding = 'up' is not one of nearest, stochastic"))
      << bad;
  // float32 variables are never rounded: stochastic would do nothing, so it is an error.
  const auto useless = error_of([] {
    config::read_training_settings(
        Config::from_string("train: {variable_rounding: stochastic}\n", "t.yaml"));
  });
  EXPECT_TRUE(contains(useless, "mtk::config::read_training_settings"));
  EXPECT_TRUE(contains(useless,
                       "t.yaml: train.variable_rounding = 'stochastic' needs "
                       "train.variable_dtype: bfloat16, not 'float32'"))
      << useless;
}
