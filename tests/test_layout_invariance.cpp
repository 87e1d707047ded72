// The core promise of MTK: the layout changes speed and memory, never results. Every op's forward
// values and every gradient, on every mesh of this rank count (1-D, 2-D, 3-D) under several
// layouts, equal the same graph run on one processor; gradients also agree with finite
// differences; runs are deterministic.

#include <mtk/base/error.hpp>
#include <mtk/lower/lowering.hpp>

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include "float64_twin.hpp"
#include "mtk_graph_test_cases.hpp"
#include "mtk_invariance_check.hpp"
#include "mtk_test_util.hpp"
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

using namespace mtk;
using namespace mtk::test;

class LayoutInvariance : public ::testing::TestWithParam<int> {};

// Where the float64 twin evaluates every op of a case, the one-processor run and every layout's
// are each within float32 rounding of it (a bound from each value's sums, not a constant); else
// every layout's within 1e-5 of the scale of the one-processor run.
TEST_P(LayoutInvariance, ForwardAndGradientsMatchOneProcessor) {
  const GraphCase c = graph_cases().at(static_cast<size_t>(GetParam()));
  const Result reference = run_case(c, single_processor_mesh(), LayoutRules());
  std::string why;
  const auto twin = float64_reference(c, &why);
  if (twin)
    expect_result_within_twin(reference, *twin, c.name + " on one processor");
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : c.layouts) {
      const LayoutRules rules = instantiate(layout, mshape);
      const std::string where =
          c.name + " on mesh " + mshape.to_string() + " layout \"" + rules.to_string() + "\"";
      const Result got = run_case(c, mesh, rules);
      if (twin)
        expect_result_within_twin(got, *twin, where);
      else
        expect_close(got, reference, where);
    }
  }
}

// The twin has a rule for every op kind of the graph cases, their gradients included.
TEST(Float64Twin, CoversEveryGraphCase) {
  for (const GraphCase& c : graph_cases()) {
    std::string why;
    EXPECT_TRUE(float64_reference(c, &why).has_value()) << c.name << ": no rule for " << why;
  }
}

// The bound is tight enough to catch a wrong product: a contraction whose terms cancel to zero,
// in float64 and float32, and the same result off by one unit of its largest term.
TEST(Float64Twin, BoundFollowsTheSumNotItsScale) {
  Graph g;
  const Dimension i{"i", 4}, k{"k", 3};
  Tensor a = var(g, "a", {i, k}), b = var(g, "b", {k});
  Tensor y = einsum({a, b}, Shape{i});
  std::map<int, HostTensor> sources;
  sources.emplace(a.id(), HostTensor(a.shape(), std::vector<float>{1, 1, -2, 1e3f, -1e3f, 0, 0.5f,
                                                                   0.5f, 1, 3, 0, 0}));
  sources.emplace(b.id(), HostTensor(b.shape(), std::vector<float>{1, 1, 1}));
  const auto twin = evaluate_float64_twin(g, sources);
  const TwinTensor& t = twin.at(y.id());
  EXPECT_EQ(t.value, (std::vector<double>{0, 0, 2, 3}));
  // sum |terms| 4, 2000, 2, 3 over 3 terms: gamma(4) of each, whatever the largest value.
  const std::vector<double> abs_sums = {4, 2000, 2, 3};
  for (size_t e = 0; e < 4; ++e)
    EXPECT_NEAR(t.bound[e], rounding_gamma(3 + 2 + 1) * abs_sums[e], 1e-15);
  HostTensor wrong(y.shape(), std::vector<float>{0, 1e-3f, 2, 3});
  EXPECT_NONFATAL_FAILURE(expect_within_twin(wrong, t, "off by 1e-3 at element 1"),
                          "more than float32 rounding may");
}

TEST_P(LayoutInvariance, EveryOpWithinRoundingOfFloat64) {
  const GraphCase c = graph_cases().at(static_cast<size_t>(GetParam()));
  std::vector<std::string> skipped;
  expect_every_op_within_rounding(c, c.name, &skipped);
  EXPECT_TRUE(skipped.empty()) << c.name << ": no rule for " << skipped.front();
}

TEST_P(LayoutInvariance, DeterministicBitwise) {
  const GraphCase c = graph_cases().at(static_cast<size_t>(GetParam()));
  const auto mshape = meshes_of_size(world_size()).back();
  Mesh mesh(mshape, MPI_COMM_WORLD);
  const LayoutRules rules = instantiate(c.layouts.back(), mshape);
  const Result a = run_case(c, mesh, rules), b = run_case(c, mesh, rules);
  for (size_t t = 0; t < a.values.size(); ++t) {
    const HostTensor &x = a.values[t], &y = b.values[t];
    ASSERT_EQ(x.dtype(), y.dtype()) << c.name << " " << a.labels[t];
    if (x.dtype() == DType::float32)
      EXPECT_EQ(x.values<float>(), y.values<float>()) << c.name << " " << a.labels[t];
    else
      EXPECT_EQ(x.values<std::int32_t>(), y.values<std::int32_t>()) << c.name << " " << a.labels[t];
  }
}

TEST_P(LayoutInvariance, GradientsMatchFiniteDifferences) {
  const GraphCase c = graph_cases().at(static_cast<size_t>(GetParam()));
  if (!c.finite_differences)
    GTEST_SKIP() << c.name << " is checked against the 1-processor run only";
  // On one processor, in float32: central differences on a few elements of every variable.
  Graph g;
  BuiltGraph built = c.build(g);
  auto vars = g.trainable_variables();
  auto grads = gradients(built.loss, vars);
  auto program = lower(g, single_processor_mesh(), LayoutRules());
  std::vector<Tensor> fetch = {built.loss};
  fetch.insert(fetch.end(), grads.begin(), grads.end());
  auto base = program->run(built.feeds, fetch);
  for (size_t k = 0; k < vars.size(); ++k) {
    auto slice = program->variable_slice(vars[k].name());
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slice);
    const std::int64_t n = static_cast<std::int64_t>(host.extent(0));
    for (std::int64_t e : {std::int64_t(0), n / 3, n - 1}) {
      const float eps = 1e-2f, saved = host(e);
      auto loss_at = [&](float value) {
        auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), slice);
        h(e) = value;
        Kokkos::View<float*> dev("perturbed", h.extent(0));
        Kokkos::deep_copy(dev, h);
        program->set_variable_slice(vars[k].name(), dev);
        program->set_step(0);
        return program->run(built.feeds, {built.loss})[0].data<float>()[0];
      };
      const double numeric =
          (static_cast<double>(loss_at(saved + eps)) - loss_at(saved - eps)) / (2.0 * eps);
      loss_at(saved);
      const double analytic = base[1 + k].data<float>()[static_cast<size_t>(e)];
      EXPECT_NEAR(numeric, analytic, 2e-2 * std::max(1.0, std::fabs(analytic)))
          << c.name << ": d loss / d " << vars[k].name() << "[" << e << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, LayoutInvariance,
                         ::testing::Range(0, static_cast<int>(graph_cases().size())),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return graph_cases().at(static_cast<size_t>(info.param)).name;
                         });

TEST(Lowering, FusedCrossEntropyEqualsTheCompositeLoss) {
  const GraphCase c = graph_cases().back();
  ASSERT_EQ(c.name, "cross_entropy");
  const Result r = run_case(c, single_processor_mesh(), LayoutRules());
  const auto& fused = r.values[0];
  const auto& composite = r.values[2];
  for (std::int64_t k = 0; k < fused.size(); ++k)
    EXPECT_NEAR(fused.data<float>()[k], composite.data<float>()[k],
                1e-5 * std::max(1.0f, std::fabs(composite.data<float>()[k])));
}

TEST(Lowering, FusedLayerNormEqualsTheComposite) {
  const auto cases = graph_cases();
  const auto c = std::find_if(cases.begin(), cases.end(),
                              [](const GraphCase& g) { return g.name == "layer_norm"; });
  ASSERT_NE(c, cases.end());
  const Result r = run_case(*c, single_processor_mesh(), LayoutRules());
  const auto& fused = r.values[0];
  const auto& composite = r.values[2];
  ASSERT_EQ(fused.size(), composite.size());
  for (std::int64_t k = 0; k < fused.size(); ++k)
    EXPECT_NEAR(fused.data<float>()[k], composite.data<float>()[k],
                1e-5 * std::max(1.0f, std::fabs(composite.data<float>()[k])));
}

TEST(Lowering, PartialSumsMergeIntoOneAllreduce) {
  // Two contractions over a split dim, added: one allreduce, not two.
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    Graph g;
    const Dimension b{"b", 8}, k{"k", 16}, j{"j", 8};
    Tensor x1 = var(g, "x1", {b, k}), x2 = var(g, "x2", {b, k}), w1 = var(g, "w1", {k, j}),
           w2 = var(g, "w2", {k, j});
    Tensor y = einsum({x1, w1}, Shape{b, j}) + einsum({x2, w2}, Shape{b, j});
    Tensor total = reduce_sum(multiply(y, 0.5));
    auto program = lower(g, mesh, LayoutRules::parse("k:" + mshape[0].name));
    auto calls = program->counters().comm_calls;
    if (mshape[0].size > 1) {
      EXPECT_EQ(calls[Collective::allreduce], 0) << "the sum stays pending until fetched";
    }
    auto got = program->run({}, {y, total});
    auto ref = lower(g, single_processor_mesh(), LayoutRules())->run({}, {y, total});
    EXPECT_NEAR(got[1].data<float>()[0], ref[1].data<float>()[0],
                1e-4 * std::max(1.0f, std::fabs(ref[1].data<float>()[0])));
    for (std::int64_t e = 0; e < ref[0].size(); ++e)
      ASSERT_NEAR(got[0].data<float>()[e], ref[0].data<float>()[e], 1e-4);
  }
}

TEST(Lowering, CountersAndExplain) {
  const int n = world_size();
  Mesh mesh(MeshShape::parse("model:" + std::to_string(n)), MPI_COMM_WORLD);
  Graph g;
  const Dimension b{"b", 16}, dm{"d_model", 8}, ff{"d_ff", 32};
  Tensor x = placeholder(g, "x", {b, dm});
  Tensor w1 = var(g, "w1", {dm, ff}), w2 = var(g, "w2", {ff, dm});
  Tensor hdn = relu(einsum({x, w1}, Shape{b, ff}));
  Tensor y = einsum({hdn, w2}, Shape{b, dm});
  Tensor loss = reduce_sum(square(y));
  auto program = lower(g, mesh, LayoutRules::parse("d_ff:model"));
  const auto& c = program->counters();
  // FLOPs: each rank does 1/n of both contractions.
  EXPECT_DOUBLE_EQ(c.flops.at(FlopClass::einsum), 2.0 * 16 * 8 * 32 * 2 / n);
  EXPECT_EQ(c.variable_bytes, (8 * 32 * 2 / n) * 4);
  EXPECT_GE(c.peak_bytes, c.variable_bytes);
  if (n > 1) {
    // One allreduce: the second contraction's partial sum, needed whole by square().
    EXPECT_EQ(c.comm_calls.at(Collective::allreduce), 1) << program->explain();
    EXPECT_EQ(c.comm_bytes.at(Collective::allreduce), 16 * 8 * 4) << program->explain();
  }
  std::string text = program->explain();
  EXPECT_NE(text.find("d_ff=32@model"), std::string::npos) << text;
  EXPECT_NE(text.find("einsum"), std::string::npos) << text;
  std::vector<float> xs(16 * 8, 0.25f);
  auto out = program->run({{x.id(), HostTensor::floats(x.shape(), xs)}}, {loss});
  EXPECT_TRUE(std::isfinite(out[0].data<float>()[0]));
}

TEST(Lowering, BadLayoutsAndOpsFailClearlyOnEveryRank) {
  const int n = world_size();
  Mesh mesh(MeshShape::parse("m:" + std::to_string(n)), MPI_COMM_WORLD);
  {
    Graph g;
    Tensor x = var(g, "x", {{"b", 8}, {"l", 16}});
    top_1(x, "l");
    if (n > 1) {
      try {
        lower(g, mesh, LayoutRules::parse("l:m"));
        FAIL() << "no error";
      } catch (const Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("top_1"), std::string::npos) << m;
        EXPECT_NE(m.find("'l'"), std::string::npos) << m;
        EXPECT_NE(m.find("whole"), std::string::npos) << m;
      }
    }
  }
  {
    Graph g;
    var(g, "w", {{"d_ff", 6}, {"heads", 4}});
    if (n > 1) {
      EXPECT_THROW(lower(g, mesh, LayoutRules::parse("d_ff:m;heads:m")), Error);
    }
  }
  {
    Graph g;
    Tensor a = var(g, "a", {{"i", 4}, {"k", 3}}), w = var(g, "w", {{"k", 5}});
    EXPECT_THROW(einsum({a, w}, Shape{{"i", 4}}), Error);  // k: 3 vs 5
    EXPECT_THROW(einsum({a}, Shape{{"z", 2}}), Error);     // unknown output dim
    EXPECT_THROW(reduce_sum(a, {"nope"}), Error);          // unknown dim
    EXPECT_THROW(einsum({a}, Shape{{"i", 5}}), Error);     // wrong size
  }
  // Still in step.
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, n);
}

TEST(Lowering, GradientsBuildNoOpsForInputsThatNeedNone) {
  // y = x w + bias: the bias is fed (like an attention bias made from segment ids), so nothing
  // asks for its gradient and no op sums dy to its shape [j]; w's gradient is still built.
  Graph g;
  const Dimension b{"b", 4}, i{"i", 3}, j{"j", 5};
  Tensor x = var(g, "x", {b, i}), w = var(g, "w", {i, j});
  Tensor bias = placeholder(g, "bias", Shape{j});
  Tensor loss = reduce_sum(square(einsum({x, w}, Shape{b, j}) + bias));
  const int before = g.num_ops();
  auto grads = gradients(loss, {w});
  EXPECT_EQ(grads[0].shape(), (Shape{i, j}));
  for (int oi = before; oi < g.num_ops(); ++oi)
    for (int t : g.op(oi).outputs)
      EXPECT_NE(g.tensor_info(t).shape, Shape{j}) << "op " << oi << " builds a gradient of bias";
  // Asked for, the bias gets its gradient.
  const int before2 = g.num_ops();
  auto both = gradients(loss, {w, bias});
  bool summed = false;
  for (int oi = before2; oi < g.num_ops(); ++oi)
    for (int t : g.op(oi).outputs)
      summed = summed || g.tensor_info(t).shape == Shape{j};
  EXPECT_TRUE(summed);
  EXPECT_EQ(both[1].shape(), Shape{j});
}

TEST(Lowering, AssignmentsUpdateVariablesLikeOneProcessor) {
  auto build = [](Graph& g) {
    const Dimension b{"b", 8}, i{"i", 8}, j{"j", 16};
    Tensor x = var(g, "x", {b, i}), w = var(g, "w", {i, j}, 0.5f);
    Tensor loss = reduce_sum(square(einsum({x, w}, Shape{b, j})));
    auto grads = gradients(loss, {x, w});
    assign_sub(w, multiply(grads[1], 0.01));
    assign_add(x, multiply(grads[0], -0.01));
    assign(g.variable("x"), g.variable("x"));
    return loss;
  };
  auto run = [&](const Mesh& mesh, const LayoutRules& rules) {
    Graph g;
    Tensor loss = build(g);
    auto p = lower(g, mesh, rules);
    std::vector<float> losses;
    for (int s = 0; s < 3; ++s)
      losses.push_back(p->run({}, {loss})[0].data<float>()[0]);
    return std::make_pair(losses, p->variable_value("w").values<float>());
  };
  auto ref = run(single_processor_mesh(), LayoutRules());
  EXPECT_LT(ref.first[2], ref.first[0]);
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : {"b:@0", "i:@0;j:@1", "j:@0"}) {
      auto got = run(mesh, instantiate(layout, mshape));
      for (int s = 0; s < 3; ++s)
        EXPECT_NEAR(got.first[static_cast<size_t>(s)], ref.first[static_cast<size_t>(s)],
                    1e-5 * std::fabs(ref.first[static_cast<size_t>(s)]));
      for (size_t e = 0; e < ref.second.size(); ++e)
        ASSERT_NEAR(got.second[e], ref.second[e], 1e-5);
    }
  }
}

TEST(Lowering, SumOfSquaresIsReduceSumOfSquareBitwiseOnEveryLayout) {
  // The fused global-norm reduction: the same value and gradient as reduce_sum(square(.)),
  // bitwise on each mesh and layout, and equal to one processor's to float rounding.
  auto run = [](const Mesh& mesh, const LayoutRules& rules, bool fused) {
    Graph g;
    const Dimension b{"b", 8}, i{"i", 8}, j{"j", 16};
    Tensor x = var(g, "x", {b, i}), w = var(g, "w", {i, j}, 0.5f);
    Tensor y = einsum({x, w}, Shape{b, j});
    Tensor loss = fused ? reduce_sum_squares(y) : reduce_sum(square(y));
    auto grads = gradients(loss, {w});
    auto p = lower(g, mesh, rules);
    auto out = p->run({}, {loss, grads[0]});
    std::vector<float> v{out[0].data<float>()[0]};
    for (std::int64_t e = 0; e < out[1].size(); ++e)
      v.push_back(out[1].data<float>()[e]);
    return v;
  };
  const auto ref = run(single_processor_mesh(), LayoutRules(), false);
  EXPECT_EQ(run(single_processor_mesh(), LayoutRules(), true), ref);
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : {"b:@0", "i:@0;j:@1", "j:@0"}) {
      const auto rules = instantiate(layout, mshape);
      const auto got = run(mesh, rules, true);
      EXPECT_EQ(got, run(mesh, rules, false)) << layout;
      for (size_t e = 0; e < ref.size(); ++e)
        ASSERT_NEAR(got[e], ref[e], 1e-5 * (1 + std::fabs(ref[e]))) << layout << " at " << e;
    }
  }
}
