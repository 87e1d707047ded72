// Convolutions and pooling with spatial blocks split over the mesh (halo exchanges between
// neighbours), channels split like d_ff, and both: forward values and gradients on every mesh of
// 1 to 8 ranks equal the one-processor run; on one processor, blocked layers equal the same layers
// on the unblocked image (SAME padding over the whole image).
#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/ops.hpp>

#include <gtest/gtest.h>

#include "mtk_invariance_check.hpp"
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace mtk::test {
namespace {

using nn::Padding;
using nn::SpatialDim;

SpatialDim sd(const std::string& dim, const std::string& tap, std::int64_t stride,
              const std::string& blocks, std::int64_t dilation = 1, std::int64_t window = 0) {
  return {dim, tap, stride, dilation, blocks, window};
}

// [b=4, hb=8, h=2, wb=8, w=2, c=8]: every blocks dim divisible by every mesh dim of the tests.
const Shape& image() {
  static const Shape s{{"b", 4}, {"hb", 8}, {"h", 2}, {"wb", 8}, {"w", 2}, {"c", 8}};
  return s;
}

const std::vector<std::string>& layouts_2d() {
  static const std::vector<std::string> l = {"hb:@0",       "hb:@0;wb:@1", "c:@0",
                                             "co:@0;hb:@1", "hb:@0;c:@1",  "wb:@0;b:@1;co:@2"};
  return l;
}

std::vector<GraphCase> cases() {
  std::vector<GraphCase> out;
  out.push_back(
      {"conv2d_3x3_same",
       [](Graph& g) {
         Tensor x = var(g, "x", image());
         Tensor f = var(g, "f", {{"kh", 3}, {"kw", 3}, {"c", 8}, {"co", 8}}, 0.2f);
         Tensor y = nn::conv(x, f, {sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")}, "c", "co");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       layouts_2d()});
  out.push_back(
      {"conv2d_4x2_stride2",
       [](Graph& g) {
         Tensor x = var(g, "x", image());
         Tensor f = var(g, "f", {{"kh", 4}, {"kw", 2}, {"c", 8}, {"co", 8}}, 0.2f);
         Tensor y = nn::conv(x, f, {sd("h", "kh", 2, "hb"), sd("w", "kw", 2, "wb")}, "c", "co");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       layouts_2d()});
  // Two convolutions in a row: with the channels split, the first one's partial sum reaches the
  // second one's halo exchange.
  out.push_back({"conv2d_two_layers",
                 [](Graph& g) {
                   Tensor x = var(g, "x", image());
                   Tensor f1 = var(g, "f1", {{"kh", 3}, {"kw", 3}, {"c", 8}, {"co", 8}}, 0.2f);
                   Tensor f2 = var(g, "f2", {{"kh", 2}, {"kw", 3}, {"co", 8}, {"c2", 8}}, 0.2f);
                   const std::vector<SpatialDim> d{sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")};
                   Tensor y = nn::conv(nn::conv(x, f1, d, "c", "co"), f2, d, "co", "c2");
                   return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
                 },
                 {"c:@0;hb:@1", "co:@0;wb:@1", "hb:@0;c:@1", "c:@0;co:@1"}});
  out.push_back({"conv_transpose2d_stride2",
                 [](Graph& g) {
                   Tensor x = var(g, "x", image());
                   Tensor f = var(g, "f", {{"kh", 3}, {"kw", 3}, {"ci", 8}, {"c", 8}}, 0.2f);
                   Tensor y = nn::conv_transpose(
                       x, f, {sd("h", "kh", 2, "hb"), sd("w", "kw", 1, "wb")}, "ci", "c");
                   return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
                 },
                 {"hb:@0", "hb:@0;wb:@1", "c:@0", "ci:@0;hb:@1", "wb:@0;b:@1;c:@2"}});
  out.push_back({"pool2d_max_avg",
                 [](Graph& g) {
                   Tensor x = var(g, "x", image());
                   Tensor m =
                       nn::max_pool(x, {sd("h", "ph", 2, "hb", 1, 3), sd("w", "pw", 1, "wb", 1, 3)},
                                    Padding::same);
                   Tensor a =
                       nn::avg_pool(x, {sd("h", "ph", 1, "hb", 1, 3), sd("w", "pw", 2, "wb", 1, 2)},
                                    Padding::same);
                   return BuiltGraph{{m, a}, weighted_loss(g, {m, a}), {}};
                 },
                 {"hb:@0", "hb:@0;wb:@1", "c:@0", "wb:@0;b:@1;c:@2"}});
  out.push_back({"conv1d_dilated",
                 [](Graph& g) {
                   Tensor x = var(g, "x", {{"b", 4}, {"lb", 8}, {"l", 4}, {"c", 8}});
                   Tensor f = var(g, "f", {{"kl", 3}, {"c", 8}, {"co", 8}}, 0.2f);
                   Tensor y = nn::conv(x, f, {sd("l", "kl", 1, "lb", 2)}, "c", "co");
                   return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
                 },
                 {"lb:@0", "co:@0", "lb:@0;c:@1", "b:@1;lb:@0;co:@2"}});
  // 3-D: the patches of [db, d, hb, h, wb, w, c] have 8 dims with the taps merged, the most the
  // einsum takes.
  out.push_back(
      {"conv3d_3x3x3",
       [](Graph& g) {
         Tensor x =
             var(g, "x", {{"db", 8}, {"d", 2}, {"hb", 8}, {"h", 2}, {"wb", 8}, {"w", 2}, {"c", 2}});
         Tensor f = var(g, "f", {{"kd", 3}, {"kh", 3}, {"kw", 3}, {"c", 2}, {"co", 2}}, 0.2f);
         Tensor y = nn::conv(
             x, f, {sd("d", "kd", 1, "db"), sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")}, "c",
             "co");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       {"db:@0;hb:@1;wb:@2", "hb:@0;wb:@1;c:@2"}});
  return out;
}

class SplitConv : public ::testing::TestWithParam<int> {};

TEST_P(SplitConv, EqualsOneProcessor) {
  const GraphCase c = cases().at(static_cast<size_t>(GetParam()));
  const Result want = run_case(c, single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : c.layouts) {
      const LayoutRules rules = instantiate(layout, mshape);
      expect_close(run_case(c, mesh, rules), want,
                   c.name + " on " + mshape.to_string() + " under \"" + rules.to_string() + "\"");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, SplitConv, ::testing::Range(0, static_cast<int>(cases().size())),
                         [](const auto& info) {
                           return cases()[static_cast<size_t>(info.param)].name;
                         });

// Layers on [b, H, W, c] and on the same image as blocks [b, hb, h, wb, w, c]: the same values.
TEST(BlockedConv, EqualsTheUnblockedImage) {
  const Shape full{{"b", 4}, {"H", 16}, {"W", 16}, {"c", 8}};
  GraphCase c{"blocked_vs_unblocked",
              [&](Graph& g) {
                Tensor x = var(g, "x", full);
                Tensor f = var(g, "f", {{"kh", 4}, {"kw", 3}, {"c", 8}, {"co", 8}}, 0.2f);
                Tensor xb = reshape(x, image());
                std::vector<Tensor> outs;
                auto both = [&](const std::vector<SpatialDim>& blocked,
                                const std::vector<SpatialDim>& whole, auto layer) {
                  Tensor yb = layer(xb, blocked), y = layer(x, whole);
                  outs.push_back(reshape(yb, y.shape()));
                  outs.push_back(y);
                };
                for (std::int64_t s : {1, 2})
                  both({sd("h", "kh", s, "hb"), sd("w", "kw", s, "wb")},
                       {sd("H", "kh", s, ""), sd("W", "kw", s, "")},
                       [&](Tensor t, const std::vector<SpatialDim>& d) {
                         return nn::conv(t, f, d, "c", "co");
                       });
                both({sd("h", "ph", 2, "hb", 1, 3), sd("w", "pw", 1, "wb", 1, 2)},
                     {sd("H", "ph", 2, "", 1, 3), sd("W", "pw", 1, "", 1, 2)},
                     [](Tensor t, const std::vector<SpatialDim>& d) {
                       return nn::max_pool(t, d, Padding::same);
                     });
                both({sd("h", "ph", 1, "hb", 1, 3), sd("w", "pw", 2, "wb", 1, 3)},
                     {sd("H", "ph", 1, "", 1, 3), sd("W", "pw", 2, "", 1, 3)},
                     [](Tensor t, const std::vector<SpatialDim>& d) {
                       return nn::avg_pool(t, d, Padding::same);
                     });
                return BuiltGraph{outs, weighted_loss(g, outs), {}};
              },
              {"hb:@0;wb:@1"}};
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    const Result r = run_case(c, mesh, instantiate(c.layouts[0], mshape));
    for (size_t k = 0; k + 1 < 8; k += 2) {
      const HostTensor &blocked = r.values[k], &whole = r.values[k + 1];
      ASSERT_EQ(blocked.size(), whole.size());
      for (std::int64_t e = 0; e < whole.size(); ++e)
        ASSERT_NEAR(blocked.at(e), whole.at(e), 1e-5) << r.labels[k] << " at " << e;
    }
  }
}

// ------------------------------------------------------------ overlapped halo exchanges
// program.overlap_halo builds each blocked convolution as its zero-halo interior plus its border
// rows and lowers every split exchange as a start and a finish moved apart; false is the plain
// convolution and the blocking exchange. Both must agree to float32 reassociation (the border
// rows come from smaller matrix products): 1e-5 of the largest value, as expect_close checks.

// Transposed convolutions (the border rows' halo_reduce runs while the interior rows are folded)
// and pooling (interior windows, then the border's), split like the convolution.
std::vector<GraphCase> overlap_transpose_and_pool_cases() {
  std::vector<GraphCase> out;
  const Shape img{{"b", 2}, {"hb", 8}, {"h", 6}, {"wb", 8}, {"w", 4}, {"c", 8}};
  // Stride 2 along h (an output block of 8, halo 0 before and 1 after: one border side), 3x3.
  out.push_back(
      {"conv_transpose2d_stride2",
       [](Graph& g) {
         Tensor x = var(g, "x", {{"b", 2}, {"hb", 8}, {"h", 4}, {"wb", 8}, {"w", 3}, {"c", 8}});
         Tensor f = var(g, "f", {{"kh", 3}, {"kw", 3}, {"ci", 8}, {"c", 8}}, 0.2f);
         Tensor y =
             nn::conv_transpose(x, f, {sd("h", "kh", 2, "hb"), sd("w", "kw", 1, "wb")}, "ci", "c");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       {"hb:@0", "hb:@0;wb:@1", "c:@0", "ci:@0;hb:@1", "hb:@0;c:@1", "wb:@0;ci:@1;b:@2"}});
  // Stride 1, dilation 2 (halo 2 on each side), an even filter of stride 2, two layers in 1-D.
  out.push_back({"conv_transpose1d_dilated_even",
                 [](Graph& g) {
                   Tensor x = var(g, "x", {{"b", 2}, {"lb", 8}, {"l", 6}, {"c", 8}});
                   Tensor f1 = var(g, "f1", {{"kl", 3}, {"ci", 8}, {"c", 8}}, 0.2f);
                   Tensor f2 = var(g, "f2", {{"kl", 4}, {"c2", 8}, {"ci", 8}}, 0.2f);
                   Tensor h = nn::conv_transpose(x, f1, {sd("l", "kl", 1, "lb", 2)}, "ci", "c");
                   Tensor y = nn::conv_transpose(relu(h), f2, {sd("l", "kl", 2, "lb")}, "c2", "ci");
                   return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
                 },
                 {"lb:@0", "c:@0", "lb:@0;ci:@1", "lb:@0;c2:@1;b:@2"}});
  // 3-D with a blocks dim of one block (w): folded with padding, not reduced.
  out.push_back(
      {"conv_transpose3d_one_block_along_w",
       [](Graph& g) {
         Tensor x =
             var(g, "x", {{"db", 8}, {"d", 3}, {"hb", 2}, {"h", 4}, {"wb", 1}, {"w", 4}, {"c", 2}});
         Tensor f = var(g, "f", {{"kd", 3}, {"kh", 2}, {"kw", 3}, {"ci", 8}, {"c", 2}}, 0.2f);
         Tensor y = nn::conv_transpose(
             x, f, {sd("d", "kd", 1, "db"), sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")}, "ci",
             "c");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       {"db:@0", "db:@0;ci:@1"}});
  // Max: stride 2 along h (halo after only), 3 wide along w; average: 3 wide along h, 2 with
  // stride 2 along w (no halo along w).
  out.push_back({"pool2d_max_avg",
                 [img](Graph& g) {
                   Tensor x = var(g, "x", img);
                   Tensor m =
                       nn::max_pool(x, {sd("h", "ph", 2, "hb", 1, 3), sd("w", "pw", 1, "wb", 1, 3)},
                                    Padding::same);
                   Tensor a =
                       nn::avg_pool(x, {sd("h", "ph", 1, "hb", 1, 3), sd("w", "pw", 2, "wb", 1, 2)},
                                    Padding::same);
                   return BuiltGraph{{m, a}, weighted_loss(g, {m, a}), {}};
                 },
                 {"hb:@0", "hb:@0;wb:@1", "c:@0", "hb:@0;c:@1", "wb:@0;c:@1;b:@2"}});
  // 1-D: a dilated max window (halo 2 on each side), an average of 4 with stride 2.
  out.push_back({"pool1d_max_dilated_avg",
                 [](Graph& g) {
                   Tensor x = var(g, "x", {{"b", 2}, {"lb", 8}, {"l", 8}, {"c", 8}});
                   Tensor m = nn::max_pool(x, {sd("l", "pl", 1, "lb", 2, 3)}, Padding::same);
                   Tensor a = nn::avg_pool(x, {sd("l", "pl", 2, "lb", 1, 4)}, Padding::same);
                   return BuiltGraph{{m, a}, weighted_loss(g, {m, a}), {}};
                 },
                 {"lb:@0", "c:@0", "lb:@0;c:@1", "lb:@0;c:@1;b:@2"}});
  // 3-D with every blocks dim exchanged: the reduces nested over three dims.
  out.push_back(
      {"conv_transpose3d_3x3x3",
       [](Graph& g) {
         Tensor x =
             var(g, "x", {{"db", 8}, {"d", 3}, {"hb", 8}, {"h", 3}, {"wb", 2}, {"w", 3}, {"c", 2}});
         Tensor f = var(g, "f", {{"kd", 3}, {"kh", 3}, {"kw", 3}, {"ci", 8}, {"c", 2}}, 0.2f);
         Tensor y = nn::conv_transpose(
             x, f, {sd("d", "kd", 1, "db"), sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")}, "ci",
             "c");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       {"db:@0;hb:@1;wb:@2", "hb:@0;ci:@1"}});
  return out;
}

// Blocks large enough to have an interior (3 to 8 positions), so the overlapped build applies.
std::vector<GraphCase> overlap_cases() {
  std::vector<GraphCase> out;
  const Shape img{{"b", 2}, {"hb", 8}, {"h", 6}, {"wb", 8}, {"w", 4}, {"c", 8}};
  out.push_back(
      {"conv2d_3x3_same",
       [img](Graph& g) {
         Tensor x = var(g, "x", img);
         Tensor f = var(g, "f", {{"kh", 3}, {"kw", 3}, {"c", 8}, {"co", 8}}, 0.2f);
         Tensor y = nn::conv(x, f, {sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")}, "c", "co");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       {"hb:@0", "hb:@0;wb:@1", "co:@0", "hb:@0;c:@1", "co:@0;wb:@1;b:@2"}});
  // Stride 2, an even filter (halo 1 before, 1 after) and a 2-D conv whose w is not blocked.
  out.push_back({"conv2d_4x3_stride2_w_unblocked",
                 [img](Graph& g) {
                   Tensor x = var(g, "x", img);
                   Tensor f = var(g, "f", {{"kh", 4}, {"kw", 3}, {"c", 8}, {"co", 8}}, 0.2f);
                   Tensor y = nn::conv(x, f, {sd("h", "kh", 2, "hb"), sd("w", "kw", 2, "")}, "c",
                                       "co", Padding::same);
                   return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
                 },
                 {"hb:@0", "hb:@0;co:@1", "c:@0;wb:@1"}});
  // Dilation 2: a halo of 2 on each side.
  out.push_back({"conv1d_dilated_two_layers",
                 [](Graph& g) {
                   Tensor x = var(g, "x", {{"b", 2}, {"lb", 8}, {"l", 8}, {"c", 8}});
                   Tensor f1 = var(g, "f1", {{"kl", 3}, {"c", 8}, {"co", 8}}, 0.2f);
                   Tensor f2 = var(g, "f2", {{"kl", 3}, {"co", 8}, {"c2", 8}}, 0.2f);
                   const std::vector<SpatialDim> d{sd("l", "kl", 1, "lb", 2)};
                   Tensor y = nn::conv(relu(nn::conv(x, f1, d, "c", "co")), f2, d, "co", "c2");
                   return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
                 },
                 {"lb:@0", "co:@0", "lb:@0;c:@1", "lb:@0;co:@1;b:@2"}});
  out.push_back(
      {"conv3d_3x3x3",
       [](Graph& g) {
         Tensor x =
             var(g, "x", {{"db", 8}, {"d", 3}, {"hb", 8}, {"h", 3}, {"wb", 2}, {"w", 3}, {"c", 2}});
         Tensor f = var(g, "f", {{"kd", 3}, {"kh", 3}, {"kw", 3}, {"c", 2}, {"co", 2}}, 0.2f);
         Tensor y = nn::conv(
             x, f, {sd("d", "kd", 1, "db"), sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")}, "c",
             "co");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       {"db:@0;hb:@1;wb:@2", "db:@0;hb:@1"}});
  // A blocks dim of one block (w): padded, not exchanged, no border along it.
  out.push_back(
      {"conv3d_one_block_along_w",
       [](Graph& g) {
         Tensor x =
             var(g, "x", {{"db", 8}, {"d", 3}, {"hb", 2}, {"h", 4}, {"wb", 1}, {"w", 4}, {"c", 2}});
         Tensor f = var(g, "f", {{"kd", 3}, {"kh", 2}, {"kw", 3}, {"c", 2}, {"co", 8}}, 0.2f);
         Tensor y = nn::conv(
             x, f, {sd("d", "kd", 1, "db"), sd("h", "kh", 1, "hb"), sd("w", "kw", 1, "wb")}, "c",
             "co");
         return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
       },
       {"db:@0", "db:@0;co:@1"}});
  // VALID is refused along blocked dims, so a VALID layer runs the plain path either way.
  out.push_back({"conv2d_valid_unblocked",
                 [](Graph& g) {
                   Tensor x = var(g, "x", {{"b", 8}, {"h", 6}, {"w", 5}, {"c", 8}});
                   Tensor f = var(g, "f", {{"kh", 3}, {"kw", 2}, {"c", 8}, {"co", 8}}, 0.2f);
                   Tensor y = nn::conv(x, f, {sd("h", "kh", 2, ""), sd("w", "kw", 1, "")}, "c",
                                       "co", Padding::valid);
                   return BuiltGraph{{y}, weighted_loss(g, {y}), {}};
                 },
                 {"b:@0", "co:@0;b:@1"}});
  for (auto& c : overlap_transpose_and_pool_cases())
    out.push_back(std::move(c));
  return out;
}

class OverlappedConv : public ::testing::TestWithParam<int> {};

// Forward values, loss and every gradient: overlapped against blocking on every mesh and layout,
// and the blocking run against one processor.
TEST_P(OverlappedConv, EqualsBlocking) {
  const GraphCase c = overlap_cases().at(static_cast<size_t>(GetParam()));
  const Result want = run_case(c, single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : c.layouts) {
      const LayoutRules rules = instantiate(layout, mshape);
      const std::string where =
          c.name + " on " + mshape.to_string() + " under \"" + rules.to_string() + "\"";
      Result on, off;
      on = run_case(c, mesh, rules, overlap_halo(true));
      off = run_case(c, mesh, rules, overlap_halo(false));
      expect_close(on, off, "overlapped vs blocking, " + where);
      expect_close(off, want, "blocking vs one processor, " + where);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layers, OverlappedConv,
                         ::testing::Range(0, static_cast<int>(overlap_cases().size())),
                         [](const auto& info) {
                           return overlap_cases()[static_cast<size_t>(info.param)].name;
                         });

// Max pooling picks the same values either way: its output is bitwise the blocking one (a
// window's maximum of -0 would come out +0, as the parts are joined by adding zeros; random inputs
// have none).
TEST(OverlappedConv, MaxPoolIsBitwiseBlocking) {
  for (const GraphCase& c : overlap_transpose_and_pool_cases()) {
    if (c.name.rfind("pool", 0) != 0)
      continue;
    for (const auto& mshape : meshes_of_size(world_size())) {
      Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const auto& layout : c.layouts) {
        const LayoutRules rules = instantiate(layout, mshape);
        Result on, off;
        on = run_case(c, mesh, rules, overlap_halo(true));
        off = run_case(c, mesh, rules, overlap_halo(false));
        const HostTensor &a = on.values.at(0), &b = off.values.at(0);  // the max_pool output
        ASSERT_EQ(a.shape(), b.shape());
        ASSERT_EQ(std::memcmp(a.data<float>(), b.data<float>(),
                              static_cast<size_t>(b.size()) * sizeof(float)),
                  0)
            << c.name << " on " << mshape.to_string() << " under \"" << rules.to_string() << "\"";
      }
    }
  }
}

// Lowered with the exchanges moved apart, the split layers (built with overlap_halo) have
// work between more of their exchanges' starts and finishes than the plain layers (built
// without): forward the interior, backward the interior's gradients.
TEST(OverlappedConv, TransposeAndPoolingSplitsHideMore) {
  if (world_size() == 1)
    GTEST_SKIP() << "no exchange to overlap on one rank";
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  const Mesh mesh(mshape, MPI_COMM_WORLD);
  for (const GraphCase& c : overlap_transpose_and_pool_cases()) {
    const LayoutRules rules = instantiate(c.layouts.front(), mshape);
    auto overlapped = [&](bool build) {
      Graph g(overlap_halo(build));
      const BuiltGraph built = c.build(g);
      gradients(built.loss, g.trainable_variables());
      return lower(g, mesh, rules, overlap_halo(true))->overlapped_halos();
    };
    const int split = overlapped(true), plain = overlapped(false);
    EXPECT_GT(split, plain) << c.name << ": " << split << " split, " << plain << " plain";
  }
}

// Every exchange, forward and backward, has a product between its start and finish, along every
// split dim: forward, each exchange of the chain runs while the outputs that need none of its
// halo are computed (nested interior/border split); backward, the halo_reduces likewise, the
// split dim's past the filter gradient's in-place allreduce. A 2-D convolution and a 2-D
// transposed convolution on 1-D and 2-D splits, at 8 ranks a 3-D convolution on a 3-D split.
TEST(OverlappedConv, EveryExchangeHasAProductBetween) {
  if (world_size() == 1)
    GTEST_SKIP() << "no exchange to overlap on one rank";
  const int n = world_size();
  struct Check {
    GraphCase c;
    std::string mesh, layout;
    size_t exchanges;
  };
  const std::string two = n == 2 ? "x:2" : "x:2;y:" + std::to_string(n / 2);
  const GraphCase conv2d = overlap_cases().at(0), transpose2d = overlap_cases().at(6);
  ASSERT_EQ(transpose2d.name, "conv_transpose2d_stride2");
  // Forward one exchange per split dim; backward one per split dim (the input's gradient).
  std::vector<Check> checks = {{conv2d, two, "hb:@0", 2}, {transpose2d, two, "hb:@0", 2}};
  if (n >= 4) {
    checks.push_back({conv2d, two, "hb:@0;wb:@1", 4});
    checks.push_back({transpose2d, two, "hb:@0;wb:@1", 4});
  }
  if (n == 8) {
    const GraphCase conv3d = overlap_cases().at(3);
    ASSERT_EQ(conv3d.name, "conv3d_3x3x3");
    checks.push_back({conv3d, "x:2;y:2;z:2", "db:@0;hb:@1;wb:@2", 6});
  }
  for (const Check& k : checks) {
    const MeshShape mshape = MeshShape::parse(k.mesh);
    const Mesh mesh(mshape, MPI_COMM_WORLD);
    const LayoutRules rules = instantiate(k.layout, mshape);
    Graph g(overlap_halo(true));
    const BuiltGraph built = k.c.build(g);
    gradients(built.loss, g.trainable_variables());
    const auto& records = lower(g, mesh, rules)->counters().halo_exchanges;
    int without = 0;
    for (const auto& e : records)
      without += e.gemm_between.empty();
    const std::string where = k.c.name + " under " + k.layout + " on " + k.mesh;
    EXPECT_EQ(records.size(), k.exchanges) << where;
    EXPECT_EQ(without, 0) << where;
  }
}

// The exchanges are moved apart where the blocks are split, and a few SGD steps of the two-layer
// 1-D model train alike (losses and final weights).
TEST(OverlappedConv, TrainsAsBlocking) {
  const GraphCase c = overlap_cases().at(2);
  auto train = [&](const Mesh& mesh, const LayoutRules& rules, bool overlap, int* overlapped) {
    Graph g(overlap_halo(overlap));
    const BuiltGraph built = c.build(g);
    const auto vars = g.trainable_variables();
    const auto grads = gradients(built.loss, vars);
    for (size_t k = 0; k < vars.size(); ++k)
      assign_sub(vars[k], multiply(grads[k], 0.05));
    auto program = lower(g, mesh, rules);
    *overlapped = program->overlapped_halos();
    std::vector<double> out;
    for (int step = 0; step < 3; ++step)
      out.push_back(program->run(built.feeds, {built.loss})[0].at(0));
    for (const auto& name : program->variable_names()) {
      const HostTensor v = program->variable_value(name);
      for (std::int64_t e = 0; e < v.size(); ++e)
        out.push_back(v.at(e));
    }
    return out;
  };
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  const Mesh mesh(mshape, MPI_COMM_WORLD);
  const LayoutRules rules = instantiate("lb:@0", mshape);
  int on_count = 0, off_count = 0;
  std::vector<double> on, off;
  on = train(mesh, rules, true, &on_count);
  off = train(mesh, rules, false, &off_count);
  EXPECT_EQ(off_count, 0);
  // Two layers: two exchanges forward, two halo_reduce backward, each with work in between.
  if (world_size() > 1) {
    EXPECT_GE(on_count, 4);
  }
  ASSERT_EQ(on.size(), off.size());
  double scale = 0;
  for (double v : off)
    scale = std::max(scale, std::fabs(v));
  for (size_t k = 0; k < on.size(); ++k)
    EXPECT_NEAR(on[k], off[k], 1e-5 * scale) << "value " << k << (k < 3 ? " (a loss)" : "");
}

// Two microbatches through the same two 1-D layers, each a recompute segment (its forward steps,
// halo starts and finishes included, run again before its backward): with the exchanges
// overlapped, recompute changes nothing, bitwise, and both equal the blocking run without
// recompute (1e-5). The steps are recomputed and the exchanges overlapped.
TEST(OverlappedConv, RecomputedMicrobatches) {
  auto build = [](bool recompute) {
    return GraphCase{
        "microbatches",
        [recompute](Graph& g) {
          Tensor f1 = var(g, "f1", {{"kl", 3}, {"c", 8}, {"co", 8}}, 0.2f);
          Tensor f2 = var(g, "f2", {{"kl", 3}, {"co", 8}, {"c2", 8}}, 0.2f);
          const std::vector<SpatialDim> d{sd("l", "kl", 1, "lb", 2)};
          std::vector<Tensor> ys;
          for (int mb = 0; mb < 2; ++mb) {
            Tensor x = var(g, cat("x", mb), {{"b", 2}, {"lb", 8}, {"l", 8}, {"c", 8}});
            if (recompute)
              g.set_recompute_tag(RecomputeTag{g.new_recompute_segment(), false});
            ys.push_back(nn::conv(relu(nn::conv(x, f1, d, "c", "co")), f2, d, "co", "c2"));
            g.set_recompute_tag(RecomputeTag{});
          }
          return BuiltGraph{ys, weighted_loss(g, ys), {}};
        },
        {}};
  };
  const MeshShape mshape = MeshShape::parse("x:" + std::to_string(world_size()));
  const Mesh mesh(mshape, MPI_COMM_WORLD);
  const LayoutRules rules = instantiate("lb:@0;co:@1", mshape);
  Result recomputed, plain, blocking;
  recomputed = run_case(build(true), mesh, rules, overlap_halo(true));
  plain = run_case(build(false), mesh, rules, overlap_halo(true));
  blocking = run_case(build(false), mesh, rules, overlap_halo(false));
  for (size_t t = 0; t < plain.values.size(); ++t)
    for (std::int64_t e = 0; e < plain.values[t].size(); ++e)
      ASSERT_EQ(recomputed.values[t].at(e), plain.values[t].at(e))
          << plain.labels[t] << " at " << e;
  expect_close(recomputed, blocking, "recomputed microbatches, overlapped vs blocking");
  Graph g(overlap_halo(true));  // read by nn::conv and by lower()
  const BuiltGraph built = build(true).build(g);
  gradients(built.loss, g.trainable_variables());
  auto program = lower(g, mesh, rules);
  EXPECT_GT(program->recomputed_steps(), 0);
  if (world_size() > 1) {
    EXPECT_GE(program->overlapped_halos(), 8);  // 4 exchanges forward, 4 reductions backward
    // Every exchange recorded for the cost model, the recomputed ones too, in the final order.
    const Counters& c = program->counters();
    ASSERT_EQ(static_cast<std::int64_t>(c.halo_exchanges.size()),
              c.comm_calls.at(Collective::halo));
    int with_products = 0;
    for (const auto& e : c.halo_exchanges)
      with_products += !e.gemm_between.empty();
    EXPECT_GE(with_products, 8);
  }
}

}  // namespace
}  // namespace mtk::test
