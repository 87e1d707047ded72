// The paper's models under the paper's layouts: a full Transformer LM (dense and MoE) and an
// encoder-decoder give the same loss and gradients on every mesh as on one processor; they learn;
// Adafactor matches hand-computed values (MoE routing against references: test_moe_routing.cpp).

#include <mtk/base/error.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>

using namespace mtk;
using namespace mtk::test;

namespace {

nn::TransformerConfig tiny_config(bool moe, bool encoder_decoder) {
  return test::tiny_transformer(moe, encoder_decoder);
}

// A tiny deterministic corpus, packed two segments per row (lengths 5 and 3): targets are the next
// token of the segment (0 = none, the padding id), so a model can learn it exactly.
void feed_tokens(const nn::ModelGraph& m, const nn::TransformerConfig& c,
                 std::map<int, HostTensor>& feeds, std::uint32_t seed) {
  const Shape s{{"batch", c.batch}, {"length", c.length}};
  std::vector<std::int32_t> in, tg, seg, pos;
  auto token = [&](std::int64_t b, std::int64_t l) {
    return static_cast<std::int32_t>((b * 5 + l * l * 3 + seed) % (c.vocab_size - 1) + 1);
  };
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      const bool first = l < 5;
      const bool last_of_segment = l == 4 || l == c.length - 1;
      in.push_back(token(b, l));
      tg.push_back(last_of_segment ? 0 : token(b, l + 1));
      seg.push_back(first ? 1 : 2);
      pos.push_back(static_cast<std::int32_t>(first ? l : l - 5));
    }
  feeds[m.inputs.id()] = HostTensor::ints(s, in);
  feeds[m.targets.id()] = HostTensor::ints(s, tg);
  feeds[m.segments.id()] = HostTensor::ints(s, seg);
  feeds[m.positions.id()] = HostTensor::ints(s, pos);
  if (m.encoder_inputs.valid()) {
    feeds[m.encoder_inputs.id()] = HostTensor::ints(s, tg);
    feeds[m.encoder_segments.id()] = HostTensor::ints(s, seg);
    feeds[m.encoder_positions.id()] = HostTensor::ints(s, pos);
  }
}

GraphCase model_case(const std::string& name, bool moe, bool encdec,
                     std::vector<std::string> layouts,
                     std::function<void(nn::TransformerConfig&)> tweak = nullptr) {
  return {name,
          [=](Graph& g) {
            auto c = tiny_config(moe, encdec);
            if (tweak)
              tweak(c);
            nn::ModelGraph m = nn::build_transformer(g, c, /*training=*/true);
            BuiltGraph r{{m.loss, m.token_loss}, m.loss, {}};
            feed_tokens(m, c, r.feeds, 5);
            return r;
          },
          std::move(layouts)};
}

// Every layout of `c` on every mesh of this rank count against one processor.
void expect_layout_invariant(const GraphCase& c) {
  const Result ref = run_case(c, single_processor_mesh(), LayoutRules());
  for (const auto& mshape : meshes_of_size(world_size())) {
    Mesh mesh(mshape, MPI_COMM_WORLD);
    for (const auto& layout : c.layouts)
      expect_close(run_case(c, mesh, instantiate(layout, mshape)), ref,
                   c.name + " on " + mshape.to_string() + " layout " + layout);
  }
}

}  // namespace

// Layout templates: @0, @1, @2 are the mesh's dims (rules for missing dims are dropped).
TEST(Models, DenseLanguageModelIsLayoutInvariant) {
  auto c = model_case("dense_lm", false, false,
                      {"batch:@0",                              // data parallel
                       "vocab:@0;d_ff:@0;heads:@0",             // model parallel
                       "batch:@0;vocab:@1;d_ff:@1;heads:@1",    // the paper's 2-D layout
                       "batch:@1;d_ff:@0;heads:@2;vocab:@0"});  // mixed
  expect_layout_invariant(c);
}

// Every op of each model, its backward included, within float32 rounding of float64 given its
// inputs (tests/float64_twin.hpp): each kernel, on this CPU and matmul backend, checked per op.
TEST(Models, EveryOpIsWithinRoundingOfFloat64) {
  for (const auto& [name, moe, encdec] :
       {std::tuple{"dense_lm", false, false}, std::tuple{"moe_lm", true, false},
        std::tuple{"encdec", false, true}}) {
    std::vector<std::string> skipped;
    expect_every_op_within_rounding(model_case(name, moe, encdec, {}), name, &skipped);
    EXPECT_TRUE(skipped.empty()) << name << ": no rule for " << skipped.front();
  }
}

TEST(Models, MixtureOfExpertsLanguageModelIsLayoutInvariant) {
  auto c = model_case("moe_lm", true, false,
                      {"batch:@0;experts:@0",                            // the paper's MoE layout
                       "batch:@0;experts:@0;d_ff:@1;heads:@1;vocab:@1",  // MoE + model parallel
                       "experts:@0;vocab:@1",                            // experts split only
                       "batch:@0"});
  expect_layout_invariant(c);
}

TEST(Models, MoeWithRandomSecondPolicyIsLayoutInvariant) {
  // The policy's draws depend on the global position only: every mesh routes alike.
  auto c = model_case("moe_lm_random_second", true, false,
                      {"batch:@0;experts:@0", "batch:@0;experts:@0;d_ff:@1;heads:@1;vocab:@1"},
                      [](nn::TransformerConfig& c) {
                        c.moe.second_policy_train = nn::SecondPolicy::random;
                        c.moe.second_threshold_train = 0.6;
                      });
  expect_layout_invariant(c);
}

TEST(Models, MoeWithRoutingGroupsIsLayoutInvariant) {
  // Groups of half a sequence: the [batch, length] -> [batch = groups, moe_group] reshape keeps
  // the batch split, so the only collectives are the experts' alltoalls.
  auto c = model_case("moe_lm_groups", true, false, {"batch:@0;experts:@0"},
                      [](nn::TransformerConfig& c) { c.moe.group_size = c.length / 2; });
  expect_layout_invariant(c);
  Mesh mesh(MeshShape::parse("batch:" + std::to_string(world_size())), MPI_COMM_WORLD);
  Graph g;
  nn::TransformerConfig config = tiny_config(true, false);
  config.moe.group_size = config.length / 2;
  nn::build_transformer(g, config, true);
  auto p = lower(g, mesh, LayoutRules::parse("batch:batch;experts:batch"));
  EXPECT_EQ(p->counters().comm_calls.count(Collective::allconcat), 0u) << p->explain();
}

TEST(Models, MoeLayoutMovesTokensWithAnAlltoall) {
  Mesh mesh(MeshShape::parse("batch:" + std::to_string(world_size())), MPI_COMM_WORLD);
  Graph g;
  nn::build_transformer(g, tiny_config(true, false), true);
  auto p = lower(g, mesh, LayoutRules::parse("batch:batch;experts:batch"));
  const auto& calls = p->counters().comm_calls;
  if (world_size() > 1) {
    ASSERT_TRUE(calls.count(Collective::alltoall)) << p->explain();
    EXPECT_EQ(calls.at(Collective::alltoall), 2) << "batch-split -> experts-split and back\n"
                                                 << p->explain();
    EXPECT_EQ(calls.count(Collective::allconcat), 0u) << p->explain();
  }
}

TEST(Models, EncoderDecoderIsLayoutInvariant) {
  auto c = model_case("encdec", false, true, {"batch:@0", "batch:@0;heads:@1;d_ff:@1;vocab:@1"});
  expect_layout_invariant(c);
}

TEST(Models, AdafactorMatchesHandComputedUpdates) {
  // loss = sum(w * c): the gradient is c, known exactly.
  for (bool factored : {false, true}) {
    Graph g;
    const Shape shape = factored ? Shape{{"r", 128}, {"c", 130}} : Shape{{"r", 2}, {"c", 3}};
    const std::int64_t n = shape.num_elements();
    Tensor w = variable(g, "w", shape, Initializer::normal(0.5f));
    Tensor cvals = random_uniform(g, shape, 3, 0.5, 1.5);
    Tensor loss = reduce_sum(w * stop_gradient(cvals));
    optim::Adafactor opt;
    optim::LearningRateSchedule lr;
    lr.kind = optim::LearningRateSchedule::Kind::adafactor_relative;
    lr.value = 0.01;
    optim::minimize(loss, opt, lr);
    auto p = lower(g, single_processor_mesh(), LayoutRules());
    auto w0 = p->variable_value("w").values<float>();
    auto c = p->run({}, {cvals})[0].values<float>();  // step 0 -> 1
    auto w1 = p->variable_value("w").values<float>();
    // Hand computation in double.
    const double step = 0, decay = 1 - std::pow(step + 1, -0.8),
                 rate = std::min(1 / std::sqrt(step + 1), 0.01);
    std::vector<double> u(static_cast<size_t>(n));
    const std::int64_t R = shape[0].size, C = shape[1].size;
    if (!factored) {
      for (std::int64_t k = 0; k < n; ++k) {
        double g2 = double(c[k]) * c[k] + 1e-30, v = (1 - decay) * g2;
        u[k] = c[k] / std::sqrt(v);
      }
    } else {
      // Largest dim c=130 ("rows" d1), second r=128 (d2): vr over c, vc over r.
      std::vector<double> vr(static_cast<size_t>(C), 0), vc(static_cast<size_t>(R), 0);
      for (std::int64_t i = 0; i < R; ++i)
        for (std::int64_t j = 0; j < C; ++j) {
          double g2 = double(c[i * C + j]) * c[i * C + j] + 1e-30;
          vr[j] += (1 - decay) * g2 / R;
          vc[i] += (1 - decay) * g2 / C;
        }
      double mean_vr = 0;
      for (double x : vr)
        mean_vr += x / C;
      for (std::int64_t i = 0; i < R; ++i)
        for (std::int64_t j = 0; j < C; ++j)
          u[i * C + j] = c[i * C + j] / std::sqrt(vr[j] / mean_vr) / std::sqrt(vc[i]);
    }
    double rms_u = 0, rms_w = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      rms_u += u[k] * u[k] / n;
      rms_w += double(w0[k]) * w0[k] / n;
    }
    rms_u = std::sqrt(rms_u);
    rms_w = std::sqrt(rms_w);
    const double clip = std::max(1.0, rms_u / 1.0), scale = rate * std::max(rms_w, 1e-3);
    for (std::int64_t k = 0; k < n; ++k)
      ASSERT_NEAR(w1[k], w0[k] - scale * u[k] / clip, 1e-6)
          << (factored ? "factored" : "full") << " element " << k;
    EXPECT_EQ(p->variable_names().size(), factored ? 4u : 3u);  // w, slots, global_step
  }
}

namespace {

// One unfactored Adafactor step on the host in double (Mesh-TensorFlow's order): the update
// g / sqrt(v) is clipped and scaled, then averaged into the momentum m, which is subtracted.
void adafactor_host_step(std::vector<double>& w, std::vector<double>& v, std::vector<double>& m,
                         const std::vector<float>& c, double step, double rate, double beta1) {
  const double n = static_cast<double>(w.size()), decay = 1 - std::pow(step + 1, -0.8);
  std::vector<double> u(w.size());
  double rms_u = 0, rms_w = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    v[k] = decay * v[k] + (1 - decay) * (double(c[k]) * c[k] + 1e-30);
    u[k] = c[k] / std::sqrt(v[k]);
    rms_u += u[k] * u[k] / n;
    rms_w += w[k] * w[k] / n;
  }
  const double clip = std::max(1.0, std::sqrt(rms_u)),
               scale = rate * std::max(std::sqrt(rms_w), 1e-3);
  for (size_t k = 0; k < w.size(); ++k) {
    m[k] = beta1 * m[k] + (1 - beta1) * u[k] / clip * scale;
    w[k] -= m[k];
  }
}

}  // namespace

TEST(Models, AdafactorMomentumAveragesTheClippedScaledUpdate) {
  // Three steps with beta1 = 0.9 and a falling learning rate, so that momentum of the unscaled
  // update (scaled afterwards by the new rate) differs from Mesh-TensorFlow's.
  Graph g;
  const Shape shape{{"r", 2}, {"c", 3}};
  Tensor w = variable(g, "w", shape, Initializer::normal(0.5f));
  Tensor cvals = random_uniform(g, shape, 3, 0.5, 1.5);
  Tensor loss = reduce_sum(w * stop_gradient(cvals));
  optim::AdafactorOptions o;
  o.beta1 = 0.9;
  optim::Adafactor opt(o);
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::adafactor_relative;
  lr.value = 1.0;  // min(1 / sqrt(step + 1), 1): 1, 0.71, 0.58
  optim::minimize(loss, opt, lr);
  auto p = lower(g, single_processor_mesh(), LayoutRules());
  const auto w0 = p->variable_value("w").values<float>();
  std::vector<double> w_host(w0.begin(), w0.end()), v(w0.size(), 0.0), m(w0.size(), 0.0);
  for (int step = 0; step < 3; ++step) {
    const auto c = p->run({}, {cvals})[0].values<float>();
    adafactor_host_step(w_host, v, m, c, step, 1 / std::sqrt(step + 1.0), o.beta1);
    const auto w_now = p->variable_value("w").values<float>();
    for (size_t k = 0; k < w_host.size(); ++k)
      ASSERT_NEAR(w_now[k], w_host[k], 1e-5) << "step " << step << " element " << k;
  }
  EXPECT_EQ(p->variable_names().size(), 4u);  // w, adafactor_v, adafactor_m, global_step
}

namespace {

// Three Adafactor steps on w [r, c] with a fresh random gradient each step; returns w and every
// slot after each step. The graph is lowered on `mesh` with `rules`.
std::vector<std::vector<float>> adafactor_trajectory(const optim::AdafactorOptions& o,
                                                     const Shape& shape, const Mesh& mesh,
                                                     const LayoutRules& rules) {
  Graph g;
  Tensor w = variable(g, "w", shape, Initializer::normal(0.5f));
  Tensor cvals = random_uniform(g, shape, 3, -1.5, 1.5);
  Tensor loss = reduce_sum(w * stop_gradient(cvals));
  optim::Adafactor opt(o);
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::adafactor_relative;
  lr.value = 0.5;  // large steps, so that clipping and the parameter scale matter
  optim::minimize(loss, opt, lr);
  auto p = lower(g, mesh, rules);
  std::vector<std::vector<float>> out;
  for (int step = 0; step < 3; ++step) {
    p->run({}, {});
    for (const auto& name : p->variable_names())
      out.push_back(p->variable_value(name).values<float>());
  }
  return out;
}

}  // namespace

TEST(Models, FusedAdafactorEqualsTheElementwiseFormula) {
  // Factored and full second moments, with and without momentum and clipping, on one processor
  // and split over every rank: the fused kernels equal the elementwise formula (the one the
  // hand-computed tests above check) to float rounding.
  Mesh mesh(MeshShape::parse("x:" + std::to_string(world_size())), MPI_COMM_WORLD);
  const LayoutRules split = LayoutRules::parse(world_size() == 2 ? "c:x" : "r:x");
  for (const Shape& shape : {Shape{{"r", 8}, {"c", 6}}, Shape{{"r", 128}, {"c", 136}}})
    for (double beta1 : {0.0, 0.9})
      for (double clipping : {1.0, 0.0}) {
        optim::AdafactorOptions o;
        o.beta1 = beta1;
        o.clipping_threshold = clipping;
        o.fused = false;
        const auto ref = adafactor_trajectory(o, shape, single_processor_mesh(), LayoutRules());
        o.fused = true;
        for (bool distributed : {false, true}) {
          const auto got =
              distributed ? adafactor_trajectory(o, shape, mesh, split)
                          : adafactor_trajectory(o, shape, single_processor_mesh(), LayoutRules());
          ASSERT_EQ(got.size(), ref.size());
          for (size_t t = 0; t < ref.size(); ++t)
            for (size_t k = 0; k < ref[t].size(); ++k)
              ASSERT_NEAR(got[t][k], ref[t][k], 2e-6 * std::max(1.0f, std::fabs(ref[t][k])))
                  << shape.to_string() << " beta1 " << beta1 << " clipping " << clipping
                  << (distributed ? " split" : " one processor") << " value " << t << " element "
                  << k;
        }
      }
}

TEST(Models, AdamMatchesHandComputedUpdates) {
  Graph g;
  const Shape shape{{"r", 8}, {"c", 8}};
  Tensor w = variable(g, "w", shape, Initializer::normal(0.5f));
  Tensor cvals = random_uniform(g, shape, 3, -1.0, 1.0);
  Tensor loss = reduce_sum(w * stop_gradient(cvals));
  optim::Adam opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.01;
  optim::minimize(loss, opt, lr);
  Mesh mesh(MeshShape::parse("x:" + std::to_string(world_size())), MPI_COMM_WORLD);
  auto p = lower(g, mesh, LayoutRules::parse(world_size() == 2 ? "c:x" : "r:x"));
  const std::vector<float> w0 = p->variable_value("w").values<float>();
  std::vector<double> w_host(w0.begin(), w0.end());
  std::vector<double> m(w_host.size());
  std::vector<double> v(w_host.size());
  for (int t = 1; t <= 3; ++t) {
    p->set_step(0);  // the same random gradient every step
    auto c = p->run({}, {cvals})[0].values<float>();
    const double step_size = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (size_t k = 0; k < w_host.size(); ++k) {
      m[k] = 0.9 * m[k] + 0.1 * c[k];
      v[k] = 0.999 * v[k] + 0.001 * c[k] * c[k];
      w_host[k] -= step_size * m[k] / (std::sqrt(v[k]) + 1e-8);
    }
    auto w_now = p->variable_value("w").values<float>();
    for (size_t k = 0; k < w_host.size(); ++k)
      ASSERT_NEAR(w_now[k], w_host[k], 1e-6) << "step " << t << " element " << k;
  }
}

namespace {

// Sum over non-padding targets of the plain cross-entropy lse(row) - logit[target], in double,
// from logits [batch, length, vocab] and int32 targets [batch, length]; adds lse^2 to *lse2_sum.
double host_cross_entropy_sum(const HostTensor& logits, const HostTensor& targets,
                              std::int64_t vocab, double* lse2_sum = nullptr) {
  const auto x = logits.values<float>();
  const auto t = targets.values<std::int32_t>();
  double sum = 0;
  for (size_t row = 0; row < t.size(); ++row) {
    if (t[row] == 0)
      continue;
    const float* r = x.data() + row * static_cast<size_t>(vocab);
    const double mx = *std::max_element(r, r + vocab);
    double s = 0;
    for (std::int64_t v = 0; v < vocab; ++v)
      s += std::exp(double(r[v]) - mx);
    const double lse = mx + std::log(s);
    sum += lse - double(r[t[row]]);
    if (lse2_sum)
      *lse2_sum += lse * lse;
  }
  return sum;
}

}  // namespace

TEST(Models, EvaluationLossIsThePlainCrossEntropy) {
  // Training-only terms (z-loss, label smoothing) are in the training loss, never in evaluation.
  auto c = tiny_config(false, false);
  c.z_loss = 0.01;
  c.label_smoothing = 0.1;
  const std::string n = std::to_string(world_size());
  Mesh mesh(MeshShape::parse("x:" + n), MPI_COMM_WORLD);
  for (bool training : {false, true}) {
    Graph g;
    nn::ModelGraph m = nn::build_transformer(g, c, training);
    std::map<int, HostTensor> feeds;
    feed_tokens(m, c, feeds, 5);
    auto p = lower(g, mesh, LayoutRules::parse("vocab:x"));
    auto out = p->run(feeds, {m.logits, m.targets, m.loss_sum, m.cross_entropy_sum, m.z_loss_sum});
    double lse2 = 0;
    const double ce = host_cross_entropy_sum(out[0], out[1], c.vocab_size, &lse2);
    const double loss_sum = out[2].values<float>()[0];
    if (training)
      EXPECT_GT(std::abs(loss_sum - ce), 1e-2 * ce) << "training adds z-loss and smoothing";
    else
      EXPECT_NEAR(loss_sum, ce, 1e-5 * ce) << "evaluation reports the plain cross-entropy";
    // The parts training logs apart: the plain cross-entropy and the z-loss (0 in evaluation).
    EXPECT_NEAR(out[3].values<float>()[0], ce, 1e-5 * ce) << "training " << training;
    EXPECT_NEAR(out[4].values<float>()[0], training ? c.z_loss * lse2 : 0.0, 1e-5 * lse2);
  }
}

TEST(Models, TinyLanguageModelDrivesLossNearZero) {
  Graph g;
  auto c = tiny_config(false, false);
  c.num_layers = 1;
  nn::ModelGraph m = nn::build_transformer(g, c, true);
  optim::Adam opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 1e-2;
  optim::minimize(m.loss, opt, lr);
  std::map<int, HostTensor> feeds;
  feed_tokens(m, c, feeds, 9);
  auto p = lower(g, single_processor_mesh(), LayoutRules());
  float first = 0, last = 0;
  for (int s = 0; s < 300; ++s) {
    float loss = p->run(feeds, {m.loss})[0].data<float>()[0];
    if (s == 0)
      first = loss;
    last = loss;
  }
  EXPECT_GT(first, 3.0f);
  EXPECT_LT(last, 0.05f) << "from " << first;
}

namespace {

// Trains a tiny encoder-decoder to map a sequence to f(sequence); returns the teacher-forced
// token accuracy on unseen sequences.
double seq2seq_accuracy(bool reverse) {
  Graph train_g;
  // vocab, d_model, d_ff, heads x d_kv, layers (and one encoder layer), length, batch
  const nn::TransformerConfig c =
      test::sized_transformer({12, 32, 64, 4, 8, 1, 6, 16}, tiny_config(false, true));
  nn::ModelGraph m = nn::build_transformer(train_g, c, true);
  optim::Adam opt;
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 3e-3;
  optim::minimize(m.loss, opt, lr);
  auto p = lower(train_g, single_processor_mesh(), LayoutRules());
  std::mt19937 rng(reverse ? 7 : 3);
  const Shape s{{"batch", c.batch}, {"length", c.length}};
  auto batch = [&](std::map<int, HostTensor>& f) {
    std::vector<std::int32_t> src, tgt, dec_in, seg(static_cast<size_t>(c.batch * c.length), 1),
        pos;
    for (std::int64_t b = 0; b < c.batch; ++b) {
      std::vector<std::int32_t> x(static_cast<size_t>(c.length));
      for (auto& t : x)
        t = static_cast<std::int32_t>(2 + rng() % (c.vocab_size - 2));
      std::vector<std::int32_t> y = x;
      if (reverse)
        std::reverse(y.begin(), y.end());
      for (std::int64_t l = 0; l < c.length; ++l) {
        src.push_back(x[static_cast<size_t>(l)]);
        tgt.push_back(y[static_cast<size_t>(l)]);
        dec_in.push_back(l == 0 ? 1 : y[static_cast<size_t>(l - 1)]);  // 1 = start
        pos.push_back(static_cast<std::int32_t>(l));
      }
    }
    f[m.encoder_inputs.id()] = HostTensor::ints(s, src);
    f[m.encoder_segments.id()] = HostTensor::ints(s, seg);
    f[m.encoder_positions.id()] = HostTensor::ints(s, pos);
    f[m.inputs.id()] = HostTensor::ints(s, dec_in);
    f[m.targets.id()] = HostTensor::ints(s, tgt);
    f[m.segments.id()] = HostTensor::ints(s, seg);
    f[m.positions.id()] = HostTensor::ints(s, pos);
  };
  std::map<int, HostTensor> f;
  for (int step = 0; step < 600; ++step) {
    batch(f);
    p->run(f, {});
  }
  batch(f);
  auto out = p->run(f, {m.logits, m.targets});
  const auto& logits = out[0];
  const auto& targets = out[1];
  int correct = 0;
  const std::int64_t V = c.vocab_size, N = c.batch * c.length;
  for (std::int64_t t = 0; t < N; ++t) {
    std::int64_t best = 0;
    for (std::int64_t v = 1; v < V; ++v)
      if (logits.data<float>()[static_cast<size_t>(t * V + v)] >
          logits.data<float>()[static_cast<size_t>(t * V + best)])
        best = v;
    correct += best == targets.data<std::int32_t>()[static_cast<size_t>(t)];
  }
  return static_cast<double>(correct) / static_cast<double>(N);
}

}  // namespace

TEST(Models, EncoderDecoderLearnsToCopy) {
  if (world_size() > 1)
    GTEST_SKIP() << "trained on one rank; layouts are covered above";
  EXPECT_GT(seq2seq_accuracy(false), 0.95);
}

TEST(Models, EncoderDecoderLearnsToReverse) {
  if (world_size() > 1)
    GTEST_SKIP() << "trained on one rank; layouts are covered above";
  EXPECT_GT(seq2seq_accuracy(true), 0.95);
}

TEST(Models, EncoderDecoderWithSharedEmbeddingIsLayoutInvariant) {
  auto c = model_case("encdec_shared", false, true,
                      {"batch:@0", "batch:@0;heads:@1;d_ff:@1;vocab:@1", "vocab:@0"},
                      [](nn::TransformerConfig& c) { c.shared_embedding = true; });
  expect_layout_invariant(c);
}

namespace {

// d loss / d the named variables of model `c` on one processor, after setting `values`.
std::vector<HostTensor> gradients_of(const nn::TransformerConfig& c,
                                     const std::vector<std::string>& names,
                                     const std::map<std::string, HostTensor>& values,
                                     std::map<std::string, HostTensor>* read = nullptr) {
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, c, true);
  std::vector<Tensor> vars;
  for (const auto& n : names)
    vars.push_back(g.variable(n));
  const std::vector<Tensor> d = gradients(m.loss, vars);
  Mesh mesh(MeshShape::parse("all:1"), MPI_COMM_SELF);
  auto p = lower(g, mesh, LayoutRules());
  for (const auto& [name, value] : values) {
    Kokkos::View<float*> v("value", static_cast<size_t>(value.size()));
    auto h = Kokkos::create_mirror_view(v);
    for (std::int64_t i = 0; i < value.size(); ++i)
      h(static_cast<size_t>(i)) = value.data<float>()[i];
    Kokkos::deep_copy(v, h);
    p->set_variable_slice(name, v);
  }
  if (read)
    for (const auto& n : names)
      (*read)[n] = p->variable_value(n);
  std::map<int, HostTensor> feeds;
  feed_tokens(m, c, feeds, 5);
  return p->run(feeds, d);
}

}  // namespace

TEST(Models, SharedEmbeddingIsOneTableWhoseGradientSumsBothUses) {
  auto shared = tiny_config(false, true);
  shared.shared_embedding = true;
  const auto separate = tiny_config(false, true);
  {
    Graph g;
    nn::build_transformer(g, shared, true);
    EXPECT_EQ(nn::count_parameters(g), shared.analytic_parameter_count());
    EXPECT_EQ(separate.analytic_parameter_count() - shared.analytic_parameter_count(),
              (shared.vocab_size + shared.length) * shared.d_model);
    EXPECT_TRUE(g.has_variable("shared/embedding") && g.has_variable("shared/positions"));
    EXPECT_FALSE(g.has_variable("encoder/embedding") || g.has_variable("decoder/embedding") ||
                 g.has_variable("encoder/positions") || g.has_variable("decoder/positions"));
  }
  // Separate tables holding the shared tables' values: the shared gradient is their sum.
  std::map<std::string, HostTensor> tables;
  const auto d_shared = gradients_of(shared, {"shared/embedding", "shared/positions"}, {}, &tables);
  const auto d_separate = gradients_of(
      separate,
      {"encoder/embedding", "decoder/embedding", "encoder/positions", "decoder/positions"},
      {{"encoder/embedding", tables["shared/embedding"]},
       {"decoder/embedding", tables["shared/embedding"]},
       {"encoder/positions", tables["shared/positions"]},
       {"decoder/positions", tables["shared/positions"]}});
  for (int t = 0; t < 2; ++t) {
    const HostTensor& sum_of = d_shared[static_cast<size_t>(t)];
    double scale = 0, nonzero_both = 0;
    for (std::int64_t i = 0; i < sum_of.size(); ++i)
      scale = std::max(scale, std::abs(sum_of.at(i)));
    ASSERT_GT(scale, 0) << "table " << t;
    for (std::int64_t i = 0; i < sum_of.size(); ++i) {
      const double enc = d_separate[static_cast<size_t>(2 * t)].at(i);
      const double dec = d_separate[static_cast<size_t>(2 * t + 1)].at(i);
      nonzero_both += enc != 0 && dec != 0;
      EXPECT_NEAR(sum_of.at(i), enc + dec, 1e-5 * scale) << "table " << t << " element " << i;
    }
    EXPECT_GT(nonzero_both, 0) << "both uses reach table " << t;
  }
  // A language model has nothing to share.
  auto lm = tiny_config(false, false);
  lm.shared_embedding = true;
  EXPECT_THROW(lm.validate(), Error);
}

TEST(Models, ParameterCountsMatchThePaper) {
  // Graph building allocates nothing, so the paper's largest model is cheap to count.
  for (int size : {-1, 0, 5}) {
    Graph g;
    auto c = nn::paper_lm(size);
    nn::build_transformer(g, c, false);
    EXPECT_EQ(nn::count_parameters(g), c.analytic_parameter_count()) << "size " << size;
  }
  EXPECT_NEAR(nn::paper_lm(-1).analytic_parameter_count() / 1e9, 0.14, 0.006);
  EXPECT_NEAR(nn::paper_lm(0).analytic_parameter_count() / 1e9, 0.22, 0.006);
  EXPECT_NEAR(nn::paper_lm(5).analytic_parameter_count() / 1e9, 4.90, 0.05);
  for (int size : {-1, 4}) {  // one embedding and one position table, as T2T's paper_tr
    Graph g;
    auto tr = nn::paper_translation(size);
    EXPECT_TRUE(tr.shared_embedding);
    nn::build_transformer(g, tr, false);
    EXPECT_EQ(nn::count_parameters(g), tr.analytic_parameter_count()) << "size " << size;
  }
}
