// The cost model and the layout search know spatial partitioning (docs/spatial.md): halo traffic
// is a collective kind in the counters (exact bytes, only where the blocks are split), the
// step-time model prices it, convolution layers offer their blocks and channel dims, and the
// search proposes spatial splits where batch parallelism cannot use the processors.

#include <mtk/cost/layout_search.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "test_machine.hpp"
#include <algorithm>
#include <string>
#include <vector>

using namespace mtk;

namespace {

const std::vector<nn::SpatialDim> kDims{{"h", "kh", 1, 1, "hb", 0}, {"w", "kw", 1, 1, "wb", 0}};

// Two SAME 3x3 convolutions over a 16 x 16 image in 4 x 4 blocks, trained (so the backward has
// the halo exchange's adjoint too).
void build_cnn(Graph& g, std::int64_t batch) {
  Tensor x =
      placeholder(g, "image", {{"b", batch}, {"hb", 4}, {"h", 4}, {"wb", 4}, {"w", 4}, {"c", 2}});
  Tensor f1 =
      variable(g, "conv1", {{"kh", 3}, {"kw", 3}, {"c", 2}, {"co", 8}}, Initializer::normal(0.1f));
  Tensor f2 =
      variable(g, "conv2", {{"kh", 3}, {"kw", 3}, {"co", 8}, {"c2", 8}}, Initializer::normal(0.1f));
  Tensor y = nn::conv(relu(nn::conv(x, f1, kDims, "c", "co")), f2, kDims, "co", "c2");
  optim::Adafactor opt;
  optim::minimize(reduce_mean(square(y)), opt, optim::LearningRateSchedule());
}

std::int64_t halo_bytes(const Counters& c) {
  const auto it = c.comm_bytes.find(Collective::halo);
  return it == c.comm_bytes.end() ? 0 : it->second;
}

TEST(SpatialCost, HaloBytesAreTheStripsSentWhereTheBlocksAreSplit) {
  Graph g;
  // 4 blocks of 5 along h; left 1, right 2: each rank sends 1 + 2 positions of [b=2, c=3].
  Tensor x = variable(g, "x", {{"b", 2}, {"hb", 4}, {"h", 5}, {"c", 3}}, Initializer::normal(1));
  Tensor y = halo_exchange(x, "hb", "h", 1, 2);
  reduce_sum(y);
  const auto split = analyze(g, MeshShape::parse("rows:2"), LayoutRules::parse("hb:rows"));
  EXPECT_EQ(halo_bytes(split->counters()), 2 * 3 * (1 + 2) * 4) << split->explain();
  EXPECT_EQ(split->counters().comm_calls.at(Collective::halo), 1);
  // Unsplit (or split over a mesh dim of one processor), the exchange is a local copy.
  for (const char* rules : {"", "b:rows"}) {
    const auto local = analyze(g, MeshShape::parse("rows:2"), LayoutRules::parse(rules));
    EXPECT_EQ(halo_bytes(local->counters()), 0) << rules;
  }
  const auto one = analyze(g, MeshShape::parse("rows:1"), LayoutRules::parse("hb:rows"));
  EXPECT_EQ(halo_bytes(one->counters()), 0);
}

TEST(SpatialCost, TheStepTimeModelPricesHaloExchanges) {
  cost::LinkLevel link{0, 1e9, 1e-5};
  // Both strips at once: one latency and the bytes at the link's bandwidth, whatever the group.
  EXPECT_DOUBLE_EQ(cost::collective_seconds(Collective::halo, 4000, 2, 4, link),
                   2 * (1e-5 + 2000 / 1e9));
  EXPECT_DOUBLE_EQ(cost::collective_seconds(Collective::halo, 4000, 2, 8, link),
                   cost::collective_seconds(Collective::halo, 4000, 2, 2, link));
  EXPECT_EQ(cost::collective_seconds(Collective::halo, 4000, 2, 1, link), 0);

  Graph g;
  build_cnn(g, 2);
  const auto p =
      analyze(g, MeshShape::parse("rows:2;cols:2"), LayoutRules::parse("hb:rows;wb:cols"));
  const Counters& c = p->counters();
  // Forward: both layers exchange along h and w; backward: the second layer's input gradient
  // sends its halo back (the first layer's input is a placeholder: no gradient).
  EXPECT_EQ(c.comm_calls.at(Collective::halo), 2 * 2 + 2) << p->explain();
  const cost::StepTime t = cost::predict_step_time(c, MeshShape::parse("rows:2;cols:2"),
                                                   test::test_machine(), cost::StepTimeOptions());
  ASSERT_TRUE(t.comm_s.count(Collective::halo));
  EXPECT_GT(t.comm_s.at(Collective::halo), 0);
}

// MTK_OVERLAP_HALO: the exchanges run behind the interior's products, so the model counts only
// halo_exposed_s = max(0, halo - matmul_s) in the total; without the overlap all of it.
TEST(SpatialCost, OverlapHidesTheHaloBehindTheProducts) {
  Graph g;
  build_cnn(g, 2);
  const MeshShape mesh = MeshShape::parse("rows:2;cols:2");
  const auto p = analyze(g, mesh, LayoutRules::parse("hb:rows;wb:cols"));
  cost::Machine fast = test::test_machine(), slow = fast;
  for (auto& link : slow.links)
    link.latency *= 1e4;  // halo time far above the products'
  for (const cost::Machine& m : {fast, slow}) {
    cost::StepTimeOptions on, off;
    on.overlap_halo = true;
    off.overlap_halo = false;
    const cost::StepTime a = cost::predict_step_time(p->counters(), mesh, m, off);
    const cost::StepTime b = cost::predict_step_time(p->counters(), mesh, m, on);
    const double halo = a.comm_s.at(Collective::halo);
    EXPECT_EQ(a.halo_exposed_s, halo);
    EXPECT_EQ(a.halo_hidden_s, 0);
    EXPECT_DOUBLE_EQ(a.total_s, a.compute_s + a.comm_total_s);
    EXPECT_DOUBLE_EQ(b.halo_exposed_s, std::max(0.0, halo - b.matmul_s));
    EXPECT_DOUBLE_EQ(b.halo_hidden_s + b.halo_exposed_s, halo);
    EXPECT_DOUBLE_EQ(b.total_s, a.total_s - b.halo_hidden_s);
  }
  cost::StepTimeOptions overlapped;
  overlapped.overlap_halo = true;
  const cost::StepTime s = cost::predict_step_time(p->counters(), mesh, slow, overlapped);
  EXPECT_GT(s.halo_exposed_s, 0);
  EXPECT_NEAR(s.halo_hidden_s, s.matmul_s, 1e-9 * s.matmul_s);  // halo - (halo - matmul)
}

TEST(SpatialSearch, ConvolutionsOfferBlocksAndChannels) {
  Graph g;
  build_cnn(g, 2);
  const auto& offered = g.offered_splits();
  for (const char* dim : {"hb", "wb", "co", "c2"})
    EXPECT_NE(std::find(offered.begin(), offered.end(), dim), offered.end()) << dim;
}

TEST(SpatialSearch, ProposesSpatialSplitsWhenTheBatchCannotUseTheProcessors) {
  Graph g;
  build_cnn(g, 1);  // one image: only its blocks (or channels) can use 4 processors
  cost::SearchOptions o;
  o.processors = 4;
  o.dims = {"b", "hb", "wb", "co", "c2"};
  const cost::SearchResult r = cost::search_layouts(g, test::test_machine(), o);
  ASSERT_FALSE(r.ranked.empty());
  bool spatial = false;
  for (const auto& c : r.ranked) {
    const std::string rules = c.rules.to_string();
    const bool splits_blocks =
        rules.find("hb:") != std::string::npos || rules.find("wb:") != std::string::npos;
    EXPECT_EQ(splits_blocks, halo_bytes(c.counters) > 0) << rules;
    spatial = spatial || splits_blocks;
  }
  EXPECT_TRUE(spatial);
}

}  // namespace
