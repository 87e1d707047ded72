// Mixture-of-experts routing groups (MoeOptions::group_size, Mesh-TF's moe group_size) against a
// host reference of Mesh-TF's top-2 gating over groups of tokens in order, with padding, a binding
// capacity and the second-expert policies, on 1, 2 and 4 ranks with the experts split.

#include <mtk/mtk.hpp>

#include <gtest/gtest.h>

#include "mtk_test_util.hpp"
#include <algorithm>
#include <random>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

const Dimension kBatch{"batch", 8}, kLength{"length", 8}, kModel{"d_model", 8}, kFf{"d_ff", 8};
constexpr std::int64_t kExperts = 4;

// Padding at the end of every third row and the start of every fourth.
std::vector<float> nonpadding_values() {
  const std::int64_t B = kBatch.size, L = kLength.size;
  std::vector<float> np(static_cast<size_t>(B * L), 1.f);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t l = 0; l < L; ++l)
      if ((b % 3 == 0 && l >= L - 3) || (b % 4 == 1 && l < 2))
        np[static_cast<size_t>(b * L + l)] = 0;
  return np;
}

struct Routing {
  std::vector<double> combine;  // [tokens, experts, capacity]
  double loss = 0;              // before the E^2 x coefficient scale
};

// Mesh-TF's _top_2_gating on groups of `group` consecutive tokens, `importance` = nonpadding;
// `keep2(t, g2)` says whether token t's renormalised second gate g2 is kept by the policy.
template <class Keep>
Routing reference(const std::vector<double>& gates, const std::vector<float>& np,
                  std::int64_t group, std::int64_t C, Keep keep2) {
  const std::int64_t E = kExperts, T = static_cast<std::int64_t>(np.size()), G = T / group;
  Routing r;
  r.combine.assign(static_cast<size_t>(T * E * C), 0.0);
  auto at = [](auto& v, std::int64_t i) -> auto& {
    return v[static_cast<size_t>(i)];
  };
  for (std::int64_t gi = 0; gi < G; ++gi) {
    std::vector<std::int64_t> count_1(static_cast<size_t>(E), 0), seen_2(count_1), e2s;
    std::vector<double> density(static_cast<size_t>(E), 0), proxy(density), g2s;
    for (std::int64_t t = gi * group; t < (gi + 1) * group; ++t) {
      const bool token = at(np, t) > 0;
      auto gate = [&](std::int64_t e) { return at(gates, t * E + e); };
      std::int64_t e1 = 0, e2 = e1 == 0 ? 1 : 0;
      for (std::int64_t e = 1; e < E; ++e)
        e1 = gate(e) > gate(e1) ? e : e1;
      e2 = e1 == 0 ? 1 : 0;
      for (std::int64_t e = 0; e < E; ++e)
        e2 = e != e1 && gate(e) > gate(e2) ? e : e2;
      const double g1 = token ? gate(e1) : 0.0, denom = g1 + gate(e2) + 1e-9;
      e2s.push_back(e2);
      g2s.push_back(gate(e2) / denom);
      if (!token)
        continue;
      for (std::int64_t e = 0; e < E; ++e)
        at(proxy, e) += gate(e) / static_cast<double>(group);
      at(density, e1) += 1.0 / static_cast<double>(group);
      const std::int64_t pos = at(count_1, e1)++;
      if (pos < C)
        at(r.combine, (t * E + e1) * C + pos) += g1 / denom;
    }
    for (auto& c : count_1)
      c = std::min(c, C);
    for (std::int64_t t = gi * group, i = 0; t < (gi + 1) * group; ++t, ++i) {
      const std::int64_t e2 = at(e2s, i);
      if (at(np, t) == 0 || !keep2(t, at(g2s, i)))
        continue;
      const std::int64_t pos = at(seen_2, e2)++ + at(count_1, e2);
      if (pos < C)
        at(r.combine, (t * E + e2) * C + pos) += at(g2s, i);
    }
    for (std::int64_t e = 0; e < E; ++e)
      r.loss += at(density, e) * at(proxy, e) / static_cast<double>(G * E);
  }
  return r;
}

struct LayerRun {
  std::vector<HostTensor> out;  // output, gates, combine, aux loss, the policy's uniforms
  std::int64_t groups = 0;
};

LayerRun run_layer(const Mesh& mesh, std::int64_t group_size, nn::SecondPolicy policy) {
  Graph g;
  nn::LayerContext ctx;
  ctx.graph = &g;
  ctx.seed = 5;
  nn::MoeOptions o;
  o.num_experts = static_cast<int>(kExperts);
  o.capacity_factor_train = 1.0;
  o.group_size = group_size;
  o.second_policy_train = policy;
  o.second_threshold_train = 0.6;
  Tensor x = placeholder(g, "x", Shape{kBatch, kLength, kModel});
  Tensor nonpadding = placeholder(g, "nonpadding", Shape{kBatch, kLength});
  const nn::MoeResult r = nn::mixture_of_experts(ctx, "moe", x, kModel, kFf, o, nonpadding);
  LayerRun run;
  run.groups = nn::moe_num_groups(kBatch.size, kLength.size, group_size);
  const std::int64_t group = kBatch.size * kLength.size / run.groups;
  Tensor u = random_uniform(g, Shape{{"batch", run.groups}, {"moe_group", group}},
                            nn::second_policy_seed(ctx, "moe"));
  auto p = lower(g, mesh, LayoutRules::parse("batch:batch;experts:batch"));
  const std::vector<float> xs = normal_values(kBatch.size * kLength.size * kModel.size, 11);
  run.out = p->run({{x.id(), HostTensor::floats(x.shape(), xs)},
                    {nonpadding.id(), HostTensor::floats(nonpadding.shape(), nonpadding_values())}},
                   {r.output, r.gates, r.combine, r.aux_loss, u});
  return run;
}

}  // namespace

TEST(MoeGroups, GroupCountsAreTheFewestEqualGroupsOfWholeOrEqualParts) {
  EXPECT_EQ(nn::moe_num_groups(8, 8, 0), 8);  // sequences
  EXPECT_EQ(nn::moe_num_groups(8, 8, 8), 8);
  EXPECT_EQ(nn::moe_num_groups(8, 8, 4), 16);         // halves of sequences
  EXPECT_EQ(nn::moe_num_groups(8, 8, 6), 16);         // at most 6: halves again
  EXPECT_EQ(nn::moe_num_groups(8, 8, 3), 32);         // 8 / 3 does not divide: quarters
  EXPECT_EQ(nn::moe_num_groups(8, 8, 16), 4);         // two sequences a group
  EXPECT_EQ(nn::moe_num_groups(8, 8, 24), 4);         // three do not divide 8 rows: two
  EXPECT_EQ(nn::moe_num_groups(8, 8, 1000), 1);       // the whole batch
  EXPECT_EQ(nn::moe_num_groups(256, 256, 1024), 64);  // the paper's LM, Mesh-TF's default
  EXPECT_EQ(nn::moe_num_groups(3, 5, 7), 3);
  EXPECT_THROW(nn::moe_num_groups(8, 8, -1), Error);
}

TEST(MoeGroups, RoutingMatchesTheReferenceOnEveryMesh) {
  const int n = world_size();
  const Mesh mesh(MeshShape::parse("batch:" + std::to_string(n)), MPI_COMM_WORLD);
  const Mesh one(MeshShape::parse("batch:1"), MPI_COMM_SELF);
  const std::vector<float> np = nonpadding_values();
  using P = nn::SecondPolicy;
  for (std::int64_t group_size : {0, 4, 16, 24})
    for (P policy : {P::all, P::random}) {
      const std::string where =
          "group_size " + std::to_string(group_size) + " policy " + nn::to_string(policy);
      const LayerRun run = run_layer(mesh, group_size, policy),
                     single = run_layer(one, group_size, policy);
      const auto& out = run.out;
      const std::int64_t tokens = kBatch.size * kLength.size, group = tokens / run.groups;
      const std::int64_t C = out[2].shape()[3].size;
      EXPECT_EQ(C, std::max<std::int64_t>(4, group / kExperts)) << where;
      std::vector<double> gates(static_cast<size_t>(tokens * kExperts));
      for (size_t i = 0; i < gates.size(); ++i)
        gates[i] = out[1].at(static_cast<std::int64_t>(i));
      const Routing want = reference(gates, np, group, C, [&](std::int64_t t, double g2) {
        return policy == P::all || out[4].at(t) < g2 / 0.6;
      });
      for (size_t i = 0; i < want.combine.size(); ++i)
        ASSERT_NEAR(out[2].at(static_cast<std::int64_t>(i)), want.combine[i], 1e-5)
            << where << " combine element " << i;
      EXPECT_NEAR(out[3].at(0), want.loss * kExperts * kExperts * 1e-2, 1e-7) << where;
      // The distributed layer against one rank.
      for (size_t k = 0; k < out.size(); ++k)
        for (std::int64_t i = 0; i < out[k].size(); ++i)
          ASSERT_NEAR(out[k].at(i), single.out[k].at(i), 1e-5) << where << " output " << k;
    }
}

TEST(MoeGroups, GroupsThatDoNotDivideOverTheMeshAreAClearError) {
  if (world_size() == 1)
    GTEST_SKIP() << "one rank: every group count divides";
  const Mesh mesh(MeshShape::parse("batch:" + std::to_string(world_size())), MPI_COMM_WORLD);
  try {
    run_layer(mesh, 64, nn::SecondPolicy::all);  // one group of the whole batch
    FAIL() << "one group over " << world_size() << " ranks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'batch' of size 1 is not divisible"), std::string::npos)
        << e.what();
  }
}
