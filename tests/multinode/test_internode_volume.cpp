// mtk::cost::internode_volume: the bytes a step sends between nodes, by hand-made counters on
// small meshes, and from a lowered data-parallel program (every gradient byte crosses once on 2
// nodes of 1 rank). The links' counters check it on emulated nodes (link_bytes.sh).

#include <mtk/base/error.hpp>
#include <mtk/cost/internode.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"

using namespace mtk;

namespace {

Counters one(Collective kind, std::vector<int> axes, std::int64_t bytes) {
  Counters c;
  c.group_bytes[{kind, axes}] = bytes;
  c.group_calls[{kind, axes}] = 1;
  return c;
}

}  // namespace

TEST(InternodeVolume, AllreduceSendsTwiceTheShareOfTheOtherNodes) {
  // batch:4 on 2 nodes of 2: one group over both nodes, each node sends 2 (2-1)/2 x payload
  const auto v =
      cost::internode_volume(one(Collective::allreduce, {0}, 1000), MeshShape::parse("batch:4"), 2);
  EXPECT_EQ(v.nodes, 2);
  EXPECT_DOUBLE_EQ(v.busiest_node_bytes, 1000);
  EXPECT_DOUBLE_EQ(v.total_bytes, 2000);
  // 4 nodes of 1: 2 (4-1)/4 = 1.5 x payload from each
  const auto w =
      cost::internode_volume(one(Collective::allreduce, {0}, 1000), MeshShape::parse("batch:4"), 1);
  EXPECT_DOUBLE_EQ(w.busiest_node_bytes, 1500);
  EXPECT_DOUBLE_EQ(w.total_bytes, 6000);
}

TEST(InternodeVolume, GroupsWithinOneNodeSendNothing) {
  // batch:2;model:2 on 2 nodes of 2: the model groups {0,1} and {2,3} stay on their node; the
  // batch groups {0,2} and {1,3} cross, one payload from each node per group
  const MeshShape mesh = MeshShape::parse("batch:2;model:2");
  EXPECT_DOUBLE_EQ(
      cost::internode_volume(one(Collective::allreduce, {1}, 1000), mesh, 2).total_bytes, 0);
  const auto v = cost::internode_volume(one(Collective::allreduce, {0}, 1000), mesh, 2);
  EXPECT_DOUBLE_EQ(v.busiest_node_bytes, 2000);
  EXPECT_DOUBLE_EQ(v.by_kind.at(Collective::allreduce), 4000);
}

TEST(InternodeVolume, GathersAlltoallsAndHalos) {
  const MeshShape mesh = MeshShape::parse("x:4");
  // allconcat of 100 bytes per member, 2 nodes of 2: each node's 2 slices to the other node
  EXPECT_DOUBLE_EQ(
      cost::internode_volume(one(Collective::allconcat, {0}, 100), mesh, 2).busiest_node_bytes,
      200);
  // alltoall of 100 per member: half of each member's parts go to the other node
  EXPECT_DOUBLE_EQ(
      cost::internode_volume(one(Collective::alltoall, {0}, 100), mesh, 2).busiest_node_bytes, 100);
  // halo: both strips counted in the payload; only the pair (1, 2) lies across the nodes
  EXPECT_DOUBLE_EQ(cost::internode_volume(one(Collective::halo, {0}, 100), mesh, 2).total_bytes,
                   100);
}

TEST(InternodeVolume, DataParallelProgramSendsItsGradientsOnce) {
  nn::TransformerConfig config = test::tiny_transformer(false, false);
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, config, true);
  optim::Adafactor opt;
  optim::minimize(m.loss, opt, optim::LearningRateSchedule());
  const MeshShape mesh = MeshShape::parse("batch:2");
  auto program = analyze(g, mesh, LayoutRules::parse("batch:batch"));
  const Counters& c = program->counters();
  const auto v = cost::internode_volume(c, mesh, 1);
  // p = 2: an allreduce's 2 (n-1)/n x payload is its payload; allconcat sends its slice
  EXPECT_NEAR(v.busiest_node_bytes, static_cast<double>(c.total_comm_bytes()), 1.0);
  EXPECT_DOUBLE_EQ(cost::internode_volume(c, mesh, 2).total_bytes, 0);
}

TEST(InternodeVolume, RanksPerNodeMustBePositive) {
  EXPECT_THROW(cost::internode_volume(Counters(), MeshShape::parse("x:2"), 0), Error);
}
