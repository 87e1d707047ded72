// YAML configuration: meshes and layouts written as maps or strings; dotted keys; overrides.

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>

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
