// Every optimizer hyperparameter set in YAML (train.adafactor.*, train.adam.*) reaches the
// optimizer: training steps of an optimizer made from the config equal, bit for bit, those of the
// optimizer constructed with the same options in C++, and differ from the defaults'; the default
// config trains exactly as the default-constructed optimizer.

#include <mtk/config/training_config.hpp>
#include <mtk/mtk.hpp>

#include <gtest/gtest.h>

#include "mtk_invariance_check.hpp"
#include <algorithm>
#include <cmath>
#include <map>

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

namespace {

// The learning rate the schedule of `yaml` gives at each of `steps`, from its graph.
std::vector<double> rates(const std::string& yaml, const std::vector<double>& steps) {
  const auto settings = config::read_training_settings(Config::from_string(yaml, "lr.yaml"));
  std::vector<double> out;
  for (double s : steps) {
    Graph g;
    Tensor step = placeholder(g, "step", Shape());
    Tensor rate = settings.lr.build(step);
    auto p = lower(g, test::single_processor_mesh(), LayoutRules());
    std::map<int, HostTensor> feeds{{step.id(), HostTensor::floats(Shape(), {float(s)})}};
    out.push_back(p->run(feeds, {rate})[0].at(0));
  }
  return out;
}

}  // namespace

TEST(LearningRateConfig, CooldownFallsLinearlyToZeroAtTheLastStep) {
  // rsqrt_decay with warm-up 4 over 20 steps, the last 5 cooling down: unchanged until step 15,
  // then (20 - step) / 5 of it, 0 from step 20 on.
  const std::vector<double> steps = {0, 3, 9, 15, 16, 18, 19, 20, 25};
  const auto with = rates(
      "train: {steps: 20, learning_rate: {schedule: rsqrt_decay, warmup_steps: 4, "
      "cooldown_steps: 5}}\n",
      steps);
  const auto without =
      rates("train: {steps: 20, learning_rate: {schedule: rsqrt_decay, warmup_steps: 4}}\n", steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    const double s = steps[i], base = 1 / std::sqrt(std::max(s, 4.0));
    EXPECT_NEAR(without[i], base, 1e-6 * base) << "step " << s;
    const double factor = std::clamp((20 - s) / 5, 0.0, 1.0);
    EXPECT_NEAR(with[i], base * factor, 1e-6 * base) << "step " << s;
  }
  // The cool-down ends at total_steps when it is set, and applies to constant rates too.
  const auto constant = rates(
      "train: {steps: 20, learning_rate: {schedule: constant, value: 0.1, total_steps: 10, "
      "cooldown_steps: 2}}\n",
      {8, 9, 10});
  EXPECT_NEAR(constant[0], 0.1, 1e-7);
  EXPECT_NEAR(constant[1], 0.05, 1e-7);
  EXPECT_NEAR(constant[2], 0.0, 1e-7);
}
