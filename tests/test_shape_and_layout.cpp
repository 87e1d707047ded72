// Shapes, mesh shapes, layout rules and tensor layouts: arithmetic and bad input.

#include <mtk/base/error.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh_shape.hpp>

#include <gtest/gtest.h>

#include <string>

using namespace mtk;

namespace {

// Expects `stmt` to throw mtk::Error whose message contains every one of `parts`.
template <class F>
void expect_error(F&& stmt, std::initializer_list<std::string> parts) {
  try {
    stmt();
    ADD_FAILURE() << "no mtk::Error thrown";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message '" << e.what() << "' lacks '" << p << "'";
  }
}

}  // namespace

TEST(Shape, LookupSizeAndStrides) {
  Shape s{{"batch", 4}, {"length", 3}, {"d_model", 5}};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s.num_elements(), 60);
  EXPECT_EQ(s.index_of("length"), 1);
  EXPECT_EQ(s.index_of("vocab"), -1);
  EXPECT_EQ(s.size_of("d_model"), 5);
  EXPECT_EQ(s.strides(), (std::vector<std::int64_t>{15, 5, 1}));
  EXPECT_EQ(s.to_string(), "[batch=4, length=3, d_model=5]");
  EXPECT_EQ(Shape().num_elements(), 1);
  EXPECT_EQ(s, (Shape{{"batch", 4}, {"length", 3}, {"d_model", 5}}));
  EXPECT_NE(s, (Shape{{"batch", 4}, {"d_model", 5}, {"length", 3}}));
}

TEST(Shape, BadInput) {
  expect_error([] { Shape{{"a", 2}, {"a", 3}}; }, {"mtk::Shape", "'a'", "twice"});
  expect_error([] { Shape{{"", 2}}; }, {"mtk::Shape", "empty name"});
  expect_error([] { Shape{{"a", -1}}; }, {"mtk::Shape", "'a'", "-1"});
  expect_error([] { Shape{{"a", 2}}.dim("b"); }, {"mtk::Shape::dim", "'b'", "[a=2]"});
}

TEST(MeshShape, ParseAndCoordinates) {
  auto m = MeshShape::parse(" batch : 4 ; model:2;");
  EXPECT_EQ(m.ndims(), 2);
  EXPECT_EQ(m.num_processors(), 8);
  EXPECT_EQ(m.to_string(), "batch:4;model:2");
  EXPECT_EQ(MeshShape::parse(m.to_string()), m);
  EXPECT_EQ(m.axis("model"), 1);
  EXPECT_EQ(m.coordinates_of(5), (std::vector<int>{2, 1}));
  for (int p = 0; p < 8; ++p)
    EXPECT_EQ(m.pnum_of(m.coordinates_of(p)), p);
}

TEST(MeshShape, BadInput) {
  expect_error([] { MeshShape::parse("batch:4;batch:2"); }, {"mtk::MeshShape", "'batch'", "twice"});
  expect_error([] { MeshShape::parse("batch=4"); },
               {"mtk::MeshShape::parse", "malformed", "batch=4"});
  expect_error([] { MeshShape::parse("batch:x"); }, {"mtk::MeshShape::parse", "'x'", "'batch'"});
  expect_error([] { MeshShape::parse("batch:0"); }, {"mtk::MeshShape::parse", "'0'"});
  expect_error([] { MeshShape::parse("batch:2:3"); }, {"malformed", "batch:2:3"});
  expect_error([] { MeshShape::parse(""); }, {"names no mesh dimension"});
  expect_error([] { MeshShape::parse("9x:2"); }, {"invalid name", "9x"});
  expect_error([] { MeshShape::parse("a:2").axis("model"); },
               {"mtk::MeshShape::axis", "'model'", "a:2"});
}

TEST(LayoutRules, ParseLookupAndInactiveRules) {
  auto r = LayoutRules::parse("batch:batch; vocab:model;d_ff:model");
  auto mesh = MeshShape::parse("batch:4;model:2");
  EXPECT_EQ(r.mesh_dim_for("vocab"), "model");
  EXPECT_EQ(r.mesh_dim_for("d_model"), "");
  EXPECT_EQ(r.mesh_axis_for("batch", mesh), 0);
  EXPECT_EQ(r.mesh_axis_for("d_ff", mesh), 1);
  // Mesh-TensorFlow semantics: a rule for a mesh dim the mesh lacks is inactive.
  EXPECT_EQ(r.mesh_axis_for("d_ff", MeshShape::parse("batch:8")), -1);
  EXPECT_EQ(LayoutRules::parse(r.to_string()).to_string(), r.to_string());
  EXPECT_EQ(r.with("d_ff", "").mesh_dim_for("d_ff"), "");
  EXPECT_EQ(r.with("heads", "model").mesh_dim_for("heads"), "model");
}

TEST(LayoutRules, BadInput) {
  expect_error([] { LayoutRules::parse("d_ff:model;d_ff:batch"); },
               {"mtk::LayoutRules", "'d_ff'", "two mesh dimensions", "'model'", "'batch'"});
  expect_error([] { LayoutRules::parse("d_ff"); },
               {"mtk::LayoutRules::parse", "malformed", "d_ff"});
  expect_error([] { LayoutRules::parse("d_ff:model-x"); }, {"mtk::LayoutRules"});
}

TEST(TensorLayout, SliceShapeOriginAndReplication) {
  auto mesh = MeshShape::parse("batch:4;model:2");
  Shape s{{"batch", 8}, {"length", 3}, {"d_ff", 6}};
  TensorLayout l(s, LayoutRules::parse("batch:batch;d_ff:model"), mesh, "h");
  EXPECT_EQ(l.slice_shape(), (Shape{{"batch", 2}, {"length", 3}, {"d_ff", 3}}));
  EXPECT_EQ(l.mesh_axes(), (std::vector<int>{0, -1, 1}));
  EXPECT_EQ(l.slice_origin({3, 1}), (std::vector<std::int64_t>{6, 0, 3}));
  EXPECT_EQ(l.split_axes(), (std::vector<int>{0, 1}));
  EXPECT_TRUE(l.replicated_axes().empty());
  EXPECT_EQ(l.to_string(), "[batch=8@batch, length=3, d_ff=6@model]");

  TensorLayout w(Shape{{"d_model", 4}, {"d_ff", 6}}, LayoutRules::parse("batch:batch;d_ff:model"),
                 mesh, "w");
  EXPECT_EQ(w.replicated_axes(), (std::vector<int>{0}));
  EXPECT_EQ(w.tensor_dim_on(1), 1);
  EXPECT_EQ(w.tensor_dim_on(0), -1);
}

TEST(TensorLayout, BadInput) {
  auto mesh = MeshShape::parse("batch:4;model:2");
  expect_error(
      [&] {
        TensorLayout(Shape{{"batch", 6}}, LayoutRules::parse("batch:batch"), mesh, "x");
      },
      {"mtk::TensorLayout", "'x'", "'batch' of size 6", "not divisible", "'batch' of size 4"});
  expect_error(
      [&] {
        TensorLayout(Shape{{"d_ff", 4}, {"heads", 4}}, LayoutRules::parse("d_ff:model;heads:model"),
                     mesh, "w");
      },
      {"mtk::TensorLayout", "'w'", "'d_ff' and 'heads'", "'model'"});
  expect_error(
      [&] {
        TensorLayout(Shape{{"a", 4}}, std::vector<int>{0, 1}, mesh, "y");
      },
      {"mtk::TensorLayout", "'y'", "rank 1"});
}
