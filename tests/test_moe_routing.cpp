// Mixture-of-experts routing against host references of Mesh-TF's top-2 gating: capacity and
// dropped tokens, the second-expert policies, and padding.

#include <mtk/mtk.hpp>

#include <gtest/gtest.h>

#include "mtk_invariance_check.hpp"
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

using namespace mtk;
using namespace mtk::test;

TEST(MoeRouting, MoeSecondPolicyMatchesTheReference) {
  // One MoE layer with room for every token: combine holds the renormalised gate_1 at the first
  // expert and, where the policy keeps it, gate_2 at the second (Mesh-TF's _top_2_gating).
  const Dimension batch{"batch", 4}, length{"length", 8}, d_model{"d_model", 8}, d_ff{"d_ff", 8};
  const std::int64_t E = 4, B = batch.size, L = length.size;
  const std::vector<float> xs = normal_values(B * L * d_model.size, 5);
  using P = nn::SecondPolicy;
  for (P policy : {P::all, P::none, P::threshold, P::random})
    for (bool training : {true, false}) {
      Graph g;
      nn::LayerContext ctx;
      ctx.graph = &g;
      ctx.training = training;
      ctx.seed = 3;
      nn::MoeOptions o;
      o.num_experts = static_cast<int>(E);
      o.capacity_factor_train = o.capacity_factor_eval = 100;
      o.second_policy_train = o.second_policy_eval = policy;
      // Renormalised second gates lie in (0, 0.5]: thresholds that keep some and drop some.
      o.second_threshold_train = policy == P::threshold ? 0.42 : 0.6;
      o.second_threshold_eval = policy == P::threshold ? 0.4 : 0.55;
      const double t = training ? o.second_threshold_train : o.second_threshold_eval;
      Tensor x = placeholder(g, "x", Shape{batch, length, d_model});
      const nn::MoeResult r = nn::mixture_of_experts(ctx, "moe", x, d_model, d_ff, o);
      Tensor u = random_uniform(g, Shape{batch, length}, nn::second_policy_seed(ctx, "moe"));
      Mesh mesh(MeshShape::parse("all:1"), MPI_COMM_SELF);
      auto p = lower(g, mesh, LayoutRules());
      const auto out =
          p->run({{x.id(), HostTensor::floats(x.shape(), xs)}}, {r.gates, r.combine, u});
      const std::int64_t C = r.combine.shape()[3].size;
      int kept = 0, dropped = 0;
      for (std::int64_t bl = 0; bl < B * L; ++bl) {
        std::vector<double> gate(static_cast<size_t>(E));
        for (std::int64_t e = 0; e < E; ++e)
          gate[static_cast<size_t>(e)] = out[0].at(bl * E + e);
        const auto i1 = std::max_element(gate.begin(), gate.end()) - gate.begin();
        std::vector<double> rest = gate;
        rest[static_cast<size_t>(i1)] = 0;
        const auto i2 = std::max_element(rest.begin(), rest.end()) - rest.begin();
        const double denom = gate[static_cast<size_t>(i1)] + rest[static_cast<size_t>(i2)] + 1e-9;
        const double g1 = gate[static_cast<size_t>(i1)] / denom;
        const double g2 = rest[static_cast<size_t>(i2)] / denom;
        const bool keep = policy == P::all         ? true
                          : policy == P::none      ? false
                          : policy == P::threshold ? g2 > t
                                                   : out[2].at(bl) < g2 / t;
        (keep ? kept : dropped) += 1;
        for (std::int64_t e = 0; e < E; ++e) {
          double routed = 0;
          for (std::int64_t c = 0; c < C; ++c)
            routed += out[1].at((bl * E + e) * C + c);
          const double want = (e == i1 ? g1 : 0.0) + (e == i2 && keep ? g2 : 0.0);
          EXPECT_NEAR(routed, want, 1e-5)
              << nn::to_string(policy) << (training ? " train" : " eval") << " token " << bl
              << " expert " << e;
        }
      }
      if (policy == P::random || policy == P::threshold) {  // the case is not trivial
        EXPECT_TRUE(kept > 0 && dropped > 0)
            << nn::to_string(policy) << " kept " << kept << " dropped " << dropped;
      }
    }
}

TEST(MoeRouting, MoePaddingTakesNoExpertNoCapacityAndNoPartInTheLoss) {
  // Capacity 4 of 8 positions, so capacity binds; padding at the end of row 0 and the start of
  // row 1. The host reference follows Mesh-TF's _top_2_gating with importance = nonpadding.
  const Dimension batch{"batch", 2}, length{"length", 8}, d_model{"d_model", 8}, d_ff{"d_ff", 8};
  const std::int64_t E = 4, B = batch.size, L = length.size;
  const std::vector<float> xs = normal_values(B * L * d_model.size, 7);
  std::vector<float> np(static_cast<size_t>(B * L), 1.f);
  for (std::int64_t l : {5, 6, 7})
    np[static_cast<size_t>(l)] = 0;
  for (std::int64_t l : {0, 1})
    np[static_cast<size_t>(L + l)] = 0;
  Graph g;
  nn::LayerContext ctx;
  ctx.graph = &g;
  nn::MoeOptions o;
  o.num_experts = static_cast<int>(E);
  o.capacity_factor_train = 1.0;
  Tensor x = placeholder(g, "x", Shape{batch, length, d_model});
  Tensor nonpadding = placeholder(g, "nonpadding", Shape{batch, length});
  const nn::MoeResult r = nn::mixture_of_experts(ctx, "moe", x, d_model, d_ff, o, nonpadding);
  Mesh mesh(MeshShape::parse("all:1"), MPI_COMM_SELF);
  auto p = lower(g, mesh, LayoutRules());
  const auto out = p->run({{x.id(), HostTensor::floats(x.shape(), xs)},
                           {nonpadding.id(), HostTensor::floats(nonpadding.shape(), np)}},
                          {r.gates, r.combine, r.aux_loss});
  const std::int64_t C = r.combine.shape()[3].size;
  ASSERT_EQ(C, 4);
  std::vector<double> want(static_cast<size_t>(B * L * E * C), 0.0);
  double loss = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<std::int64_t> count_1(static_cast<size_t>(E), 0), seen_2(count_1);
    std::vector<double> density(static_cast<size_t>(E), 0), proxy(density);
    struct Choice {
      std::int64_t e1, e2;
      double g1, g2;
    };
    std::vector<Choice> choice(static_cast<size_t>(L));
    for (std::int64_t l = 0; l < L; ++l) {
      const std::int64_t bl = b * L + l;
      const bool token = np[static_cast<size_t>(bl)] > 0;
      std::vector<double> gate(static_cast<size_t>(E));
      for (std::int64_t e = 0; e < E; ++e) {
        gate[static_cast<size_t>(e)] = out[0].at(bl * E + e);
        proxy[static_cast<size_t>(e)] += token ? gate[static_cast<size_t>(e)] / L : 0.0;
      }
      Choice& c = choice[static_cast<size_t>(l)];
      c.e1 = std::max_element(gate.begin(), gate.end()) - gate.begin();
      std::vector<double> rest = gate;
      rest[static_cast<size_t>(c.e1)] = 0;
      c.e2 = std::max_element(rest.begin(), rest.end()) - rest.begin();
      const double g1 = token ? gate[static_cast<size_t>(c.e1)] : 0.0;
      const double denom = g1 + rest[static_cast<size_t>(c.e2)] + 1e-9;
      c.g1 = g1 / denom;
      c.g2 = rest[static_cast<size_t>(c.e2)] / denom;
      if (!token)
        continue;
      density[static_cast<size_t>(c.e1)] += 1.0 / L;
      const std::int64_t pos = count_1[static_cast<size_t>(c.e1)]++;
      if (pos < C)
        want[static_cast<size_t>((bl * E + c.e1) * C + pos)] += c.g1;
    }
    for (std::int64_t e = 0; e < E; ++e)
      count_1[static_cast<size_t>(e)] = std::min(count_1[static_cast<size_t>(e)], C);
    for (std::int64_t l = 0; l < L; ++l) {
      const std::int64_t bl = b * L + l;
      if (np[static_cast<size_t>(bl)] == 0)
        continue;
      const Choice& c = choice[static_cast<size_t>(l)];
      const std::int64_t pos =
          seen_2[static_cast<size_t>(c.e2)]++ + count_1[static_cast<size_t>(c.e2)];
      if (pos < C)
        want[static_cast<size_t>((bl * E + c.e2) * C + pos)] += c.g2;
    }
    for (std::int64_t e = 0; e < E; ++e)
      loss += density[static_cast<size_t>(e)] * proxy[static_cast<size_t>(e)] / (B * E);
  }
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(out[1].at(static_cast<std::int64_t>(i)), want[i], 1e-5) << "combine element " << i;
  EXPECT_NEAR(out[2].at(0), loss * E * E * o.loss_coefficient, 1e-7);
}

TEST(MoeRouting, MoeRoutingRespectsCapacityAndDroppedTokensPassThrough) {
  Graph g;
  const Dimension batch{"batch", 2}, length{"length", 32}, d_model{"d_model", 8}, d_ff{"d_ff", 16};
  nn::LayerContext ctx{&g, true, 0.0, 1};
  Tensor x = variable(g, "x", Shape{batch, length, d_model}, Initializer::normal(1.0f));
  nn::MoeOptions o;
  o.num_experts = 4;
  o.capacity_factor_train = 0.5;  // capacity 4: many tokens are dropped
  auto r = nn::mixture_of_experts(ctx, "moe", x, d_model, d_ff, o);
  Tensor out = x + r.output;  // the residual connection
  auto p = lower(g, single_processor_mesh(), LayoutRules());
  auto v = p->run({}, {r.combine, r.output, out, x, r.aux_loss});
  const auto& combine = v[0];
  const std::int64_t E = 4, C = combine.shape()[3].size, L = 32;
  EXPECT_EQ(C, 4);
  int dropped = 0;
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t e = 0; e < E; ++e)
      for (std::int64_t c = 0; c < C; ++c) {
        int tokens_in_slot = 0;
        for (std::int64_t l = 0; l < L; ++l)
          tokens_in_slot +=
              combine.data<float>()[static_cast<size_t>(((b * L + l) * E + e) * C + c)] > 0;
        EXPECT_LE(tokens_in_slot, 1)
            << "slot (" << b << "," << e << "," << c << ") holds two tokens";
      }
    for (std::int64_t l = 0; l < L; ++l) {
      int routes = 0;
      double weight = 0;
      for (std::int64_t k = 0; k < E * C; ++k) {
        double w = combine.data<float>()[static_cast<size_t>((b * L + l) * E * C + k)];
        routes += w > 0;
        weight += w;
      }
      EXPECT_LE(routes, 2) << "top-2 gating";
      EXPECT_LE(weight, 1.0 + 1e-5);
      if (routes == 0) {
        ++dropped;
        for (std::int64_t d = 0; d < 8; ++d) {
          const size_t k = static_cast<size_t>((b * L + l) * 8 + d);
          EXPECT_EQ(v[1].data<float>()[k], 0.0f) << "a dropped token has no expert output";
          EXPECT_EQ(v[2].data<float>()[k], v[3].data<float>()[k])
              << "a dropped token passes through the residual";
        }
      }
    }
  }
  EXPECT_GT(dropped, 0) << "capacity 4 of 32 tokens over 4 experts must drop some";
  EXPECT_GT(v[4].data<float>()[0], 0.0f);
}
