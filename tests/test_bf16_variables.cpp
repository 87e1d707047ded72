// bfloat16 variables and optimizer slots (train.variable_dtype, train.optimizer_slot_dtype): the
// state is stored in 2 bytes, read as float32, updated in float32 and rounded to nearest even or
// stochastically (train.variable_rounding). Training learns, every stored value is a bf16 value
// after each step, the losses are the same on every mesh (to float32 reassociation), stochastic
// rounding stores bitwise the same on every mesh and keeps updates below half an ulp, and the
// memory prediction counts the halved bytes.

#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/nn/nn.hpp>
#include <mtk/optim/optim.hpp>

#include <gtest/gtest.h>

#include "model_fixtures.hpp"
#include "mtk_invariance_check.hpp"
#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace mtk;
using namespace mtk::test;

namespace {

struct StateSetup {
  std::string optimizer = "adam";
  DType variables = DType::bfloat16, slots = DType::bfloat16;
  std::string activation_dtype = "float32";
  nn::Recompute recompute = nn::Recompute::none;
  int microbatches = 1;
  Rounding rounding = Rounding::nearest;
};

std::unique_ptr<optim::Optimizer> make_optimizer(const StateSetup& s) {
  std::unique_ptr<optim::Optimizer> o;
  if (s.optimizer == "adam") {
    o = std::make_unique<optim::Adam>();
  } else if (s.optimizer == "sgd") {
    o = std::make_unique<optim::Sgd>();
  } else {
    optim::AdafactorOptions a;
    a.beta1 = 0.5;                  // a momentum slot too
    a.min_dim_size_to_factor = 16;  // factored second moments on the tiny model
    o = std::make_unique<optim::Adafactor>(a);
  }
  o->set_state_dtypes(s.variables, s.slots, s.rounding);
  return o;
}

struct Trained {
  std::vector<double> losses;
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::unique_ptr<Program> program;
};

// `steps` steps of the tiny model; after each, `each_step` sees the program.
template <class F>
Trained train(const StateSetup& s, const Mesh& mesh, const LayoutRules& rules, int steps,
              F each_step) {
  Trained t;
  nn::TransformerConfig c = tiny_transformer();
  c.activation_dtype = s.activation_dtype;
  c.recompute = s.recompute;
  auto opt = make_optimizer(s);
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = s.optimizer == "sgd" ? 0.2 : 0.01;
  const nn::TrainingGraph tg = nn::build_training(*t.graph, c, s.microbatches, *opt, lr, 3);
  const auto feeds = lm_feeds(
      tg.model, c, [](std::int64_t b, std::int64_t l) { return (b * 7 + l * l * 3 + 1) % 31 + 1; },
      [](std::int64_t b, std::int64_t l) { return (b * 5 + l * 3 + 2) % 31 + 1; });
  t.program = lower(*t.graph, mesh, rules);
  for (int k = 0; k < steps; ++k) {
    t.losses.push_back(t.program->run(feeds, {tg.model.loss})[0].at(0));
    each_step(*t.program);
  }
  return t;
}

Trained train(const StateSetup& s, const Mesh& mesh, const LayoutRules& rules, int steps) {
  return train(s, mesh, rules, steps, [](Program&) {});
}

// Every value of every bf16-stored variable is a bf16 value; returns how many were checked.
std::int64_t expect_bf16_values(Program& p, const std::string& where) {
  std::int64_t checked = 0;
  for (const auto& name : p.variable_names()) {
    if (p.variable_storage_dtype(name) != DType::bfloat16)
      continue;
    const HostTensor v = p.variable_value(name);
    for (float x : v.values<float>()) {
      EXPECT_EQ(kernels::round_to_bfloat16(x), x) << where << ": variable " << name;
      ++checked;
    }
  }
  return checked;
}

}  // namespace

TEST(Bf16Variables, AdamTrainsWithEveryStoredValueInBf16) {
  std::int64_t checked = 0;
  const Trained t = train(StateSetup{}, single_processor_mesh(), LayoutRules(), 6, [&](Program& p) {
    checked += expect_bf16_values(p, "step " + std::to_string(p.step()));
  });
  EXPECT_GT(checked, 6 * 3 * 1000) << "variables and slots of the tiny model";
  EXPECT_LT(t.losses.back(), 0.9 * t.losses.front()) << "bf16 master variables do not learn";
  // The step counter stays float32 (bf16 counts exactly only to 256).
  EXPECT_EQ(t.program->variable_storage_dtype("global_step"), DType::float32);
  EXPECT_EQ(t.program->variable_value("global_step").at(0), 6.0);
  for (const auto& name : t.program->variable_names()) {
    if (name != "global_step") {
      EXPECT_EQ(t.program->variable_storage_dtype(name), DType::bfloat16) << name;
    }
  }
}

TEST(Bf16Variables, EveryOptimizerAndModeLearns) {
  const std::vector<StateSetup> setups = {
      {"sgd", DType::bfloat16, DType::float32, "float32", nn::Recompute::none, 1},
      {"adafactor", DType::bfloat16, DType::bfloat16, "bfloat16", nn::Recompute::none, 1},
      {"adafactor", DType::float32, DType::bfloat16, "float32", nn::Recompute::layer, 1},
      {"adam", DType::bfloat16, DType::float32, "bfloat16", nn::Recompute::attention, 2},
      {"adam", DType::bfloat16, DType::bfloat16, "float32", nn::Recompute::none, 1,
       Rounding::stochastic},
      {"adafactor", DType::bfloat16, DType::float32, "float32", nn::Recompute::layer, 2,
       Rounding::stochastic},
  };
  for (const StateSetup& s : setups) {
    const std::string where = s.optimizer + " variables " + dtype_name(s.variables) + " slots " +
                              dtype_name(s.slots) + " contractions " + s.activation_dtype +
                              " microbatches " + std::to_string(s.microbatches) +
                              (s.rounding == Rounding::stochastic ? " stochastic" : "");
    const Trained t = train(s, single_processor_mesh(), LayoutRules(), 4,
                            [&](Program& p) { expect_bf16_values(p, where); });
    EXPECT_LT(t.losses.back(), t.losses.front()) << where;
    for (const auto& name : t.program->variable_names()) {
      const bool slot =
          name.find("/adam_") != std::string::npos || name.find("/adafactor_") != std::string::npos;
      const DType want = name == "global_step" ? DType::float32 : slot ? s.slots : s.variables;
      EXPECT_EQ(t.program->variable_storage_dtype(name), want) << where << ": " << name;
    }
  }
}

TEST(Bf16Variables, SameLossesOnEveryMesh) {
  StateSetup s;
  s.optimizer = "adafactor";
  const auto ref = train(s, single_processor_mesh(), LayoutRules(), 3).losses;
  const auto shapes = meshes_of_size(world_size());
  const MeshShape& mshape = shapes.back();  // the most mesh dims
  Mesh mesh(mshape, MPI_COMM_WORLD);
  for (const std::string layout : {"batch:@0;d_ff:@1;heads:@1", "vocab:@0;d_model:@1"}) {
    const auto got = train(s, mesh, instantiate(layout, mshape), 3).losses;
    for (size_t k = 0; k < ref.size(); ++k)
      // Layouts reorder float32 sums; a changed last bit can move a bf16 rounding of a stored
      // value, so the tolerance is bf16's (2^-8) rather than float32's.
      EXPECT_NEAR(got[k], ref[k], 4e-3 * ref[k])
          << mshape.to_string() << " layout " << layout << " step " << k;
  }
}

TEST(Bf16Variables, MemoryPredictionCountsHalfTheBytes) {
  auto analyzed = [](const StateSetup& s, std::int64_t* state_elements) {
    Graph g;
    auto opt = make_optimizer(s);
    optim::LearningRateSchedule lr;
    nn::build_training(g, tiny_transformer(), 1, *opt, lr, 3);
    *state_elements = 0;
    for (int i : g.variable_ops())
      if (g.op(i).name != "global_step")
        *state_elements += g.tensor_info(g.op(i).outputs[0]).shape.num_elements();
    const auto p = analyze(g, MeshShape::parse("a:2"), LayoutRules::parse("d_ff:a"));
    for (const auto& name : p->variable_names())
      EXPECT_EQ(p->variable_storage_dtype(name),
                name == "global_step" ? DType::float32 : s.variables)
          << name;
    return p->counters();
  };
  std::int64_t n32 = 0, n16 = 0;
  StateSetup f32;
  f32.variables = f32.slots = DType::float32;
  const Counters c32 = analyzed(f32, &n32);
  const Counters c16 = analyzed(StateSetup{}, &n16);
  ASSERT_EQ(n32, n16);
  // Every variable but the 4-byte global step halves (split or replicated alike).
  EXPECT_EQ(c32.variable_bytes - 4, 2 * (c16.variable_bytes - 4));
  EXPECT_LT(c16.peak_bytes, c32.peak_bytes);
  EXPECT_LT(c16.live_peak_bytes, c32.live_peak_bytes);
}

TEST(Bf16Variables, Bf16IsAStorageTypeOnly) {
  Graph g;
  for (auto make :
       {+[](Graph& gr) {
          variable(gr, "v", Shape{{"d", 4}}, Initializer::zeros(), true, DType::bfloat16);
        },
        +[](Graph& gr) {
          placeholder(gr, "p", Shape{{"d", 4}}, DType::bfloat16);
        }}) {
    try {
      make(g);
      ADD_FAILURE() << "a bfloat16 graph tensor was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("storage type"), std::string::npos) << e.what();
    }
  }
  Tensor ids = variable(g, "ids", Shape{{"d", 4}}, Initializer::zeros(), false, DType::int32);
  EXPECT_THROW(g.set_variable_storage(ids.name(), DType::bfloat16), Error);
  EXPECT_THROW(g.set_variable_storage("nothing", DType::bfloat16), Error);
  optim::Sgd sgd;
  EXPECT_THROW(sgd.set_state_dtypes(DType::int32, DType::float32), Error);
  // float32 variables are not rounded: stochastic rounding of them is an error, not a no-op.
  Tensor f = variable(g, "f", Shape{{"d", 4}}, Initializer::zeros());
  for (auto bad :
       {+[](Graph& gr) { gr.set_variable_storage("f", DType::float32, Rounding::stochastic); },
        +[](Graph&) {
          optim::Sgd o;
          o.set_state_dtypes(DType::float32, DType::bfloat16, Rounding::stochastic);
        }}) {
    try {
      bad(g);
      ADD_FAILURE() << "stochastic rounding of float32 variables was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stochastic rounding needs bfloat16"), std::string::npos)
          << e.what();
    }
  }
  g.set_variable_storage(f.name(), DType::bfloat16, Rounding::stochastic);
  EXPECT_EQ(g.variable_attrs(f.producer()).rounding, Rounding::stochastic);
}

namespace {

// Every variable's values after each of `steps` steps of an elementwise model: loss =
// sum(w^2 * c), so each float32 update is the same operations on every layout and the stored
// values may be compared bitwise (the tiny Transformer's reassociated sums move a rounding now
// and then, SameLossesOnEveryMesh).
std::vector<std::vector<float>> train_elementwise(const std::string& optimizer, Rounding rounding,
                                                  const Mesh& mesh, const LayoutRules& rules,
                                                  int steps) {
  Graph g;
  const Shape s{{"rows", 8}, {"cols", 16}};
  const Tensor w = variable(g, "w", s, Initializer::normal(1.f, 0.f, 5));
  const Tensor c = placeholder(g, "c", s);
  StateSetup setup;
  setup.optimizer = optimizer;
  setup.rounding = rounding;
  auto opt = make_optimizer(setup);
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::constant;
  lr.value = 0.01;
  const Tensor loss = reduce_sum(square(w) * c);
  optim::minimize(loss, *opt, lr);
  auto p = lower(g, mesh, rules);
  std::vector<float> cv = normal_values(s.num_elements(), 3);
  for (float& v : cv)
    v = std::fabs(v) + 0.1f;
  std::vector<std::vector<float>> out;
  for (int k = 0; k < steps; ++k) {
    p->run({{c.id(), HostTensor::floats(s, cv)}}, {loss});
    for (const auto& name : p->variable_names())
      out.push_back(p->variable_value(name).values<float>());
  }
  return out;
}

}  // namespace

TEST(Bf16Variables, StochasticRoundingIsTheSameOnEveryMeshAndLayout) {
  const auto shapes = meshes_of_size(world_size());
  for (const std::string optimizer : {"sgd", "adam"}) {
    const auto ref = train_elementwise(optimizer, Rounding::stochastic, single_processor_mesh(),
                                       LayoutRules(), 6);
    // Not the nearest roundings: the random bits decide.
    EXPECT_NE(ref, train_elementwise(optimizer, Rounding::nearest, single_processor_mesh(),
                                     LayoutRules(), 6))
        << optimizer;
    for (const MeshShape& mshape : {shapes.front(), shapes.back()}) {
      Mesh mesh(mshape, MPI_COMM_WORLD);
      for (const std::string layout : {"rows:@0;cols:@1", "cols:@0", "cols:@0;rows:@1"}) {
        const auto got = train_elementwise(optimizer, Rounding::stochastic, mesh,
                                           instantiate(layout, mshape), 6);
        ASSERT_EQ(got.size(), ref.size());
        for (size_t k = 0; k < ref.size(); ++k)
          // Bitwise (the values are bf16 values: equal floats are equal bits, NaN aside).
          EXPECT_EQ(got[k], ref[k]) << optimizer << " " << mshape.to_string() << " layout "
                                    << layout << " (variable, step) " << k;
      }
    }
  }
}

// Updates below half an ulp: nearest loses every one, stochastic keeps them on average.
TEST(Bf16Variables, StochasticRoundingKeepsUpdatesBelowHalfAnUlp) {
  const std::int64_t n = 1 << 16;
  const int steps = 8;
  const double lr = 1.0 / 1024;  // the bf16 ulp below 1 is 2^-8: each step is a quarter of one
  auto train_ones = [&](Rounding rounding) {
    Graph g;
    const Tensor w = variable(g, "w", Shape{{"n", n}}, Initializer::ones());
    optim::Sgd sgd;
    sgd.set_state_dtypes(DType::bfloat16, DType::float32, rounding);
    optim::LearningRateSchedule schedule;
    schedule.kind = optim::LearningRateSchedule::Kind::constant;
    schedule.value = lr;
    const Tensor loss = reduce_sum(w);  // gradient 1 everywhere
    optim::minimize(loss, sgd, schedule);
    auto p = lower(g, single_processor_mesh(), LayoutRules());
    for (int k = 0; k < steps; ++k)
      p->run({}, {loss});
    return p->variable_value("w").values<float>();
  };
  for (float v : train_ones(Rounding::nearest))
    ASSERT_EQ(v, 1.f) << "nearest even keeps 1 - 2^-10";
  const auto w = train_ones(Rounding::stochastic);
  double mean = 0;
  for (float v : w) {
    ASSERT_EQ(kernels::round_to_bfloat16(v), v);
    ASSERT_TRUE(v <= 1.f && v >= 1.f - steps / 256.f) << v;
    mean += v / static_cast<double>(n);
  }
  // Each rounding adds at most a variance of ulp^2 / 4: the mean's sd is below 2.2e-5.
  EXPECT_NEAR(mean, 1.0 - steps * lr, 1.2e-4);
}
