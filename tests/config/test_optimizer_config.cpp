// Every optimizer hyperparameter set in YAML (train.adafactor.*, train.adam.*) reaches the
// optimizer: training steps of an optimizer made from the config equal, bit for bit, those of the
// optimizer constructed with the same options in C++, and differ from the defaults'; the default
// config trains exactly as the default-constructed optimizer.

#include <mtk/config/training_config.hpp>
#include <mtk/mtk.hpp>

#include <gtest/gtest.h>

#include "mtk_invariance_check.hpp"

using namespace mtk;

namespace {

// Three steps on w [r=8, c=6] with loss sum(w * c) for a fixed random c; w and every slot after
// each step.
std::vector<std::vector<float>> trajectory(optim::Optimizer& opt,
                                           std::vector<std::string>* names = nullptr) {
  Graph g;
  const Shape shape{{"r", 8}, {"c", 6}};
  Tensor w = variable(g, "w", shape, Initializer::normal(0.5f));
  Tensor cvals = random_uniform(g, shape, 3, -1.5, 1.5);
  Tensor loss = reduce_sum(w * stop_gradient(cvals));
  optim::LearningRateSchedule lr;
  lr.kind = optim::LearningRateSchedule::Kind::adafactor_relative;
  lr.value = 0.5;
  optim::minimize(loss, opt, lr);
  auto p = lower(g, test::single_processor_mesh(), LayoutRules());
  if (names)
    *names = p->variable_names();
  std::vector<std::vector<float>> out;
  for (int step = 0; step < 3; ++step) {
    p->run({}, {});
    for (const auto& name : p->variable_names())
      out.push_back(p->variable_value(name).values<float>());
  }
  return out;
}

std::vector<std::vector<float>> from_config(const std::string& yaml,
                                            std::vector<std::string>* names = nullptr) {
  const auto settings = config::read_training_settings(Config::from_string(yaml, "opt.yaml"));
  auto opt = config::make_optimizer(settings.optimizer);
  return trajectory(*opt, names);
}

}  // namespace

TEST(OptimizerConfig, TheNamesAreTheOptimizers) {
  EXPECT_EQ(config::optimizer_names(), (std::vector<std::string>{"adafactor", "adam", "sgd"}));
  EXPECT_TRUE(config::optimizer_has_options("adafactor"));
  EXPECT_TRUE(config::optimizer_has_options("adam"));
  EXPECT_FALSE(config::optimizer_has_options("sgd"));
}

TEST(OptimizerConfig, DefaultConfigTrainsAsTheDefaultOptimizers) {
  optim::Adafactor adafactor;
  EXPECT_EQ(from_config("{}"), trajectory(adafactor));
  optim::Adam adam;
  EXPECT_EQ(from_config("train: {optimizer: adam}\n"), trajectory(adam));
  optim::Sgd sgd;
  EXPECT_EQ(from_config("train: {optimizer: sgd}\n"), trajectory(sgd));
}

TEST(OptimizerConfig, AdafactorHyperparametersReachTheOptimizer) {
  for (bool factored : {true, false}) {
    optim::AdafactorOptions o;
    o.beta1 = 0.5;
    o.decay_exponent = 0.7;
    o.clipping_threshold = 0.5;
    o.epsilon1 = 1e-3;
    o.epsilon2 = 0.25;
    o.parameter_scaling = !factored;
    o.factored = factored;
    o.min_dim_size_to_factor = 4;  // the 8 x 6 weight is factored only with this
    o.fused = !factored;
    const std::string yaml =
        cat("train:\n  adafactor: {beta1: 0.5, decay_exponent: 0.7, clipping_threshold: 0.5, "
            "epsilon1: 1e-3, epsilon2: 0.25, parameter_scaling: ",
            factored ? "false" : "true", ", factored: ", factored ? "true" : "false",
            ", min_dim_size_to_factor: 4, fused: ", factored ? "false" : "true", "}\n");
    std::vector<std::string> names;
    const auto got = from_config(yaml, &names);
    optim::Adafactor direct(o);
    EXPECT_EQ(got, trajectory(direct)) << yaml;
    optim::Adafactor defaults;
    EXPECT_NE(got, trajectory(defaults)) << yaml;
    // beta1 > 0 keeps a momentum slot; min_dim_size_to_factor 4 factors the 8 x 6 weight.
    auto has = [&](const std::string& n) {
      return std::find(names.begin(), names.end(), n) != names.end();
    };
    EXPECT_TRUE(has("w/adafactor_m"));
    EXPECT_EQ(has("w/adafactor_vr"), factored);
    EXPECT_EQ(has("w/adafactor_v"), !factored);
  }
}

TEST(OptimizerConfig, EachAdafactorHyperparameterChangesTraining) {
  // Each key alone, against the same member set in C++: a key bound to another member fails.
  const std::vector<std::pair<std::string, void (*)(optim::AdafactorOptions&)>> cases = {
      {"beta1: 0.5", [](optim::AdafactorOptions& o) { o.beta1 = 0.5; }},
      {"decay_exponent: 0.5", [](optim::AdafactorOptions& o) { o.decay_exponent = 0.5; }},
      {"clipping_threshold: 0.25", [](optim::AdafactorOptions& o) { o.clipping_threshold = 0.25; }},
      {"epsilon1: 0.5", [](optim::AdafactorOptions& o) { o.epsilon1 = 0.5; }},
      {"epsilon2: 1.0", [](optim::AdafactorOptions& o) { o.epsilon2 = 1.0; }},
      {"parameter_scaling: false", [](optim::AdafactorOptions& o) { o.parameter_scaling = false; }},
      {"min_dim_size_to_factor: 2",
       [](optim::AdafactorOptions& o) { o.min_dim_size_to_factor = 2; }},
  };
  optim::Adafactor defaults;
  const auto baseline = trajectory(defaults);
  for (const auto& [text, set] : cases) {
    optim::AdafactorOptions o;
    set(o);
    optim::Adafactor direct(o);
    const auto got = from_config("train:\n  adafactor: {" + text + "}\n");
    EXPECT_EQ(got, trajectory(direct)) << text;
    EXPECT_NE(got, baseline) << text;
  }
  // factored and fused: the same values as their C++ options (factored needs a big enough dim).
  for (const std::string text : {"factored: false", "fused: false"}) {
    optim::AdafactorOptions o;
    (text == "fused: false" ? o.fused : o.factored) = false;
    optim::Adafactor direct(o);
    EXPECT_EQ(from_config("train:\n  adafactor: {" + text + "}\n"), trajectory(direct)) << text;
  }
}

TEST(OptimizerConfig, AdamHyperparametersReachTheOptimizer) {
  const std::vector<std::pair<std::string, void (*)(optim::AdamOptions&)>> cases = {
      {"beta1: 0.5", [](optim::AdamOptions& o) { o.beta1 = 0.5; }},
      {"beta2: 0.9", [](optim::AdamOptions& o) { o.beta2 = 0.9; }},
      {"epsilon: 0.5", [](optim::AdamOptions& o) { o.epsilon = 0.5; }},
      {"beta1: 0.8, beta2: 0.95, epsilon: 1e-3", [](optim::AdamOptions& o) {
         o.beta1 = 0.8;
         o.beta2 = 0.95;
         o.epsilon = 1e-3;
       }}};
  optim::Adam defaults;
  const auto baseline = trajectory(defaults);
  for (const auto& [text, set] : cases) {
    optim::AdamOptions o;
    set(o);
    optim::Adam direct(o);
    const auto got = from_config("train:\n  optimizer: adam\n  adam: {" + text + "}\n");
    EXPECT_EQ(got, trajectory(direct)) << text;
    EXPECT_NE(got, baseline) << text;
  }
}
