// The config field tables (io/mtk/config/schema.hpp): every field of model, train and checkpoint
// read into its member, the defaults equal to the settings structs' own, range, choice, unknown-key
// and preset errors naming file, key, value and what is allowed, write -> read round trips, the
// Markdown reference, and every optimizer hyperparameter reaching the optimizer.

#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/mtk.hpp>

#include <gtest/gtest.h>

#include "error_text.hpp"
#include "mtk_invariance_check.hpp"

using namespace mtk;

namespace {

using mtk::test::contains;
using mtk::test::error_of;

Config yaml(const std::string& text) {
  return Config::from_string(text, "run.yaml");
}

// Every field of `schema` has the same value in `a` and `b`.
template <class S>
void expect_same(const config::Schema<S>& schema, const S& a, const S& b, const std::string& what) {
  for (const auto& f : schema.fields())
    EXPECT_EQ(config::value_text(f.get(a)), config::value_text(f.get(b)))
        << what << ": " << f.spec.key;
}

}  // namespace

TEST(ConfigSchema, ReadsEveryModelField) {
  const auto m = transformer_config_from(
      yaml("model:\n  vocab_size: 1000\n  d_model: 96\n  d_ff: 384\n  num_heads: 3\n  d_kv: 32\n"
           "  num_layers: 5\n  num_encoder_layers: 4\n  shared_embedding: true\n  length: 40\n  "
           "batch: 12\n  dropout: 0.25\n"
           "  label_smoothing: 0.125\n  z_loss: 0.0001\n  gelu: true\n  norm: rms_norm\n"
           "  activation_dtype: bfloat16\n  recompute: layer\n  loss_chunks: 5\n"
           "  attention_window: 4\n  local_attention_block: 8\n  moe_every: 2\n"
           "  moe: {num_experts: 4, capacity_factor_train: 1.5, capacity_factor_eval: 2.5, "
           "loss_coefficient: 0.02, second_policy_train: random, second_policy_eval: threshold, "
           "second_threshold_train: 0.25, second_threshold_eval: 0.3, group_size: 512}\n"));
  EXPECT_EQ(m.vocab_size, 1000);
  EXPECT_EQ(m.d_model, 96);
  EXPECT_EQ(m.d_ff, 384);
  EXPECT_EQ(m.num_heads, 3);
  EXPECT_EQ(m.d_kv, 32);
  EXPECT_EQ(m.num_layers, 5);
  EXPECT_EQ(m.num_encoder_layers, 4);
  EXPECT_TRUE(m.shared_embedding);
  EXPECT_EQ(m.length, 40);
  EXPECT_EQ(m.batch, 12);
  EXPECT_EQ(m.dropout, 0.25);
  EXPECT_EQ(m.label_smoothing, 0.125);
  EXPECT_EQ(m.z_loss, 0.0001);
  EXPECT_TRUE(m.gelu);
  EXPECT_EQ(m.norm, "rms_norm");
  EXPECT_EQ(m.activation_dtype, "bfloat16");
  EXPECT_EQ(m.moe_every, 2);
  EXPECT_EQ(m.moe.num_experts, 4);
  EXPECT_EQ(m.moe.capacity_factor_train, 1.5);
  EXPECT_EQ(m.moe.capacity_factor_eval, 2.5);
  EXPECT_EQ(m.moe.loss_coefficient, 0.02);
  EXPECT_EQ(m.moe.second_policy_train, nn::SecondPolicy::random);
  EXPECT_EQ(m.moe.second_policy_eval, nn::SecondPolicy::threshold);
  EXPECT_EQ(m.moe.second_threshold_train, 0.25);
  EXPECT_EQ(m.moe.second_threshold_eval, 0.3);
  EXPECT_EQ(m.moe.group_size, 512);
  EXPECT_EQ(m.recompute, nn::Recompute::layer);
  EXPECT_EQ(m.loss_chunks, 5);
  EXPECT_EQ(m.attention_window, 4);
  EXPECT_EQ(m.local_attention_block, 8);
  EXPECT_EQ(config::model_schema().keys().size(), 31u);  // preset + 21 + moe's 9
}

TEST(ConfigSchema, ReadsEveryTrainingField) {
  const auto s = config::read_training_settings(yaml(
      "train:\n  steps: 500\n  seed: 7\n  log_every: 5\n  run_dir: runs/a\n  microbatches: 4\n"
      "  learning_rate: {schedule: linear_decay, value: 0.5, warmup_steps: 20, total_steps: 400}\n"
      "  optimizer: adafactor\n"
      "  adafactor: {beta1: 0.5, decay_exponent: 0.7, clipping_threshold: 0.5, epsilon1: 1e-20,\n"
      "              epsilon2: 0.01, parameter_scaling: false, factored: false,\n"
      "              min_dim_size_to_factor: 4, fused: false}\n"
      "checkpoint: {every: 50, keep: 9}\n"));
  EXPECT_EQ(s.steps, 500);
  EXPECT_EQ(s.seed, 7u);
  EXPECT_EQ(s.log_every, 5);
  EXPECT_EQ(s.run_dir, "runs/a");
  EXPECT_EQ(s.microbatches, 4);
  EXPECT_EQ(s.lr.kind, optim::LearningRateSchedule::Kind::linear_decay);
  EXPECT_EQ(s.lr.value, 0.5);
  EXPECT_EQ(s.lr.warmup_steps, 20);
  EXPECT_EQ(s.lr.total_steps, 400);
  EXPECT_EQ(s.optimizer.name, "adafactor");
  const optim::AdafactorOptions& a = s.optimizer.adafactor;
  EXPECT_EQ(a.beta1, 0.5);
  EXPECT_EQ(a.decay_exponent, 0.7);
  EXPECT_EQ(a.clipping_threshold, 0.5);
  EXPECT_EQ(a.epsilon1, 1e-20);
  EXPECT_EQ(a.epsilon2, 0.01);
  EXPECT_FALSE(a.parameter_scaling);
  EXPECT_FALSE(a.factored);
  EXPECT_EQ(a.min_dim_size_to_factor, 4);
  EXPECT_FALSE(a.fused);
  EXPECT_EQ(s.checkpoint_every, 50);
  EXPECT_EQ(s.checkpoint_keep, 9);
  const auto adam = config::read_training_settings(
      yaml("train: {optimizer: adam, adam: {beta1: 0.8, beta2: 0.99, epsilon: 1e-6}}\n"));
  EXPECT_EQ(adam.optimizer.name, "adam");
  EXPECT_EQ(adam.optimizer.adam.beta1, 0.8);
  EXPECT_EQ(adam.optimizer.adam.beta2, 0.99);
  EXPECT_EQ(adam.optimizer.adam.epsilon, 1e-6);
  EXPECT_EQ(config::read_training_settings(yaml("train: {optimizer: sgd}\n")).optimizer.name,
            "sgd");
}

TEST(ConfigSchema, DefaultsAreTheSettingsStructs) {
  // An empty config gives the structs' defaults, so results stay bitwise what they were.
  expect_same(config::model_schema(), transformer_config_from(yaml("{}")), nn::TransformerConfig(),
              "model");
  const auto s = config::read_training_settings(yaml("{}"));
  config::TrainingSettings want;
  want.lr.total_steps = static_cast<double>(want.steps);  // its default is train.steps
  expect_same(config::train_schema(), s, want, "train");
  expect_same(config::checkpoint_schema(), s, want, "checkpoint");
  expect_same(config::adafactor_schema(), s.optimizer.adafactor, optim::AdafactorOptions(),
              "adafactor");
  expect_same(config::adam_schema(), s.optimizer.adam, optim::AdamOptions(), "adam");
  EXPECT_EQ(s.optimizer.name, "adafactor");
  EXPECT_EQ(s.lr.kind, optim::LearningRateSchedule::Kind::rsqrt_decay);
  EXPECT_EQ(config::read_training_settings(yaml("train: {steps: 77}\n")).lr.total_steps, 77);
  // Presets start from the paper's configs; other keys override them.
  auto m = transformer_config_from(yaml("model: {preset: paper_lm:2, d_ff: 100}\n"));
  auto paper = nn::paper_lm(2);
  paper.d_ff = 100;
  expect_same(config::model_schema(), m, paper, "paper_lm:2");
}

TEST(ConfigSchema, ValuesOutOfRangeNameFileKeyValueAndRange) {
  auto model = [](const std::string& text) {
    return error_of([&] { transformer_config_from(yaml(text)); });
  };
  auto train = [](const std::string& text) {
    return error_of([&] { config::read_training_settings(yaml(text)); });
  };
  std::string e = model("model: {dropout: 2}\n");
  EXPECT_TRUE(contains(e, "run.yaml: model.dropout = 2 is not a number in [0, 0.999]")) << e;
  e = model("model: {moe: {num_experts: 0}}\n");
  EXPECT_TRUE(contains(e, "run.yaml: model.moe.num_experts = 0 is not an integer in [1, 1048576]"))
      << e;
  e = train("train: {adafactor: {beta1: 1.5}}\n");
  EXPECT_TRUE(contains(e, "run.yaml: train.adafactor.beta1 = 1.5 is not a number in [0, 0.999]"))
      << e;
  e = train("train: {adafactor: {factored: maybe}}\n");
  EXPECT_TRUE(contains(e, "train.adafactor.factored = maybe is not true or false")) << e;
  e = train("train: {optimizer: adamw}\n");
  EXPECT_TRUE(contains(e, "train.optimizer = 'adamw' is not one of adafactor, adam, sgd")) << e;
  e = train("train: {learning_rate: {schedule: cosine}}\n");
  EXPECT_TRUE(contains(e,
                       "train.learning_rate.schedule = 'cosine' is not one of constant, "
                       "rsqrt_decay, linear_decay, adafactor_relative"))
      << e;
  e = train("train: {microbatches: 0}\n");
  EXPECT_TRUE(contains(e, "train.microbatches = 0 is not an integer in [1, 1048576]")) << e;
  e = model("model: {recompute: all}\n");
  EXPECT_TRUE(contains(e, "model.recompute = 'all' is not one of none, norms, attention, layer"))
      << e;
  e = train("checkpoint: {keep: 0}\n");
  EXPECT_TRUE(contains(e, "checkpoint.keep = 0 is not an integer in [1, 1000000]")) << e;
  e = model("model: {preset: paper_lm:9}\n");
  EXPECT_TRUE(contains(e,
                       "run.yaml: model.preset = 'paper_lm:9' is not paper_lm:-1..5 or "
                       "paper_translation:-1..4"))
      << e;
  EXPECT_TRUE(contains(model("model: {preset: gpt:1}\n"), "model.preset = 'gpt:1' is not"));
  e = train("train: {adafactor: 3}\n");
  EXPECT_TRUE(contains(e, "'train.adafactor' must be a section")) << e;
}

TEST(ConfigSchema, UnknownKeysAreErrorsWithASuggestion) {
  std::string e = error_of([] { transformer_config_from(yaml("model: {d_mdoel: 5}\n")); });
  EXPECT_TRUE(contains(e, "run.yaml: unknown key 'model.d_mdoel'; did you mean 'model.d_model'?"))
      << e;
  EXPECT_TRUE(contains(e, "(known: preset, vocab_size, d_model,")) << e;
  e = error_of([] { config::read_training_settings(yaml("train: {adafactor: {beta: 0.9}}\n")); });
  EXPECT_TRUE(contains(e,
                       "unknown key 'train.adafactor.beta'; did you mean "
                       "'train.adafactor.beta1'?"))
      << e;
  e = error_of([] { config::read_training_settings(yaml("train: {stepz: 3}\n")); });
  EXPECT_TRUE(contains(e, "unknown key 'train.stepz'; did you mean 'train.steps'?")) << e;
  // Nothing near: no suggestion.
  e = error_of([] { config::read_training_settings(yaml("checkpoint: {frequency: 3}\n")); });
  EXPECT_TRUE(contains(e, "unknown key 'checkpoint.frequency' (known: every, keep, fletcher32)"))
      << e;
  e = error_of([] { reject_unknown_sections(yaml("trian: {}\n"), "mtk-x", {"model", "train"}); });
  EXPECT_TRUE(contains(e, "mtk-x: run.yaml: unknown section 'trian'; did you mean 'train'?")) << e;
  // Another optimizer's hyperparameters would do nothing: an error naming both.
  e = error_of([] { config::read_training_settings(yaml("train: {adam: {beta1: 0.8}}\n")); });
  EXPECT_TRUE(contains(e, "run.yaml: train.adam.beta1 is set but train.optimizer is 'adafactor'"))
      << e;
}

TEST(ConfigSchema, ModelWriteReadRoundTrip) {
  std::vector<nn::TransformerConfig> models;
  for (int size = -1; size <= 5; ++size)
    models.push_back(nn::paper_lm(size));
  for (int size = -1; size <= 4; ++size)
    models.push_back(nn::paper_translation(size));
  nn::TransformerConfig odd;
  odd.dropout = 0.1;  // not exact in binary: the text must still read back to the same double
  odd.z_loss = 1e-4;
  odd.moe.capacity_factor_train = 1.0 / 3.0;
  odd.moe_every = 3;
  odd.gelu = true;
  odd.norm = "rms_norm";
  odd.activation_dtype = "bfloat16";
  models.push_back(odd);
  for (const auto& m : models) {
    const std::string text = transformer_config_yaml(m);
    EXPECT_FALSE(contains(text, "preset")) << text;
    const auto back = transformer_config_from(Config::from_string(text, "written.yaml"));
    expect_same(config::model_schema(), back, m, m.to_string());
    EXPECT_EQ(back.moe.capacity_factor_train, m.moe.capacity_factor_train);  // bitwise
    // Every key is written.
    for (const auto& key : config::model_schema().keys())
      if (key != "preset") {
        EXPECT_TRUE(Config::from_string(text).has("model." + key)) << key;
      }
  }
}

TEST(ConfigSchema, TrainingWriteReadRoundTrip) {
  config::TrainingSettings s;
  s.steps = 1234;
  s.seed = 99;
  s.run_dir = "run dir: with a colon";  // written as a string, not parsed as YAML
  s.lr.kind = optim::LearningRateSchedule::Kind::constant;
  s.lr.value = 0.3;
  s.lr.total_steps = 7;
  s.optimizer.name = "adam";
  s.optimizer.adam.beta2 = 0.98;
  s.checkpoint_keep = 11;
  Config c = Config::from_string("{}");
  config::write_training_settings(c, s);
  EXPECT_FALSE(c.has("train.adafactor")) << c.dump();  // only the chosen optimizer's
  const auto back = config::read_training_settings(Config::from_string(c.dump()));
  expect_same(config::train_schema(), back, s, "train");
  expect_same(config::checkpoint_schema(), back, s, "checkpoint");
  EXPECT_EQ(back.run_dir, s.run_dir);
}

TEST(ConfigSchema, MarkdownReferenceListsEveryKey) {
  const std::string md = config::model_schema().markdown("model");
  EXPECT_TRUE(contains(md, "| key | type | default | allowed | meaning |")) << md;
  for (const auto& key : config::model_schema().keys())
    EXPECT_TRUE(contains(md, "| `model." + key + "` |")) << key;
  EXPECT_TRUE(contains(md, "| `model.dropout` | number | 0 | [0, 0.999] |")) << md;
  EXPECT_TRUE(contains(md, "| `model.norm` | choice | layer_norm | `layer_norm`, `rms_norm` |"));
  const std::string train = config::train_schema().markdown("train");
  EXPECT_TRUE(contains(train, "| `train.learning_rate.total_steps` | number | train.steps |"))
      << train;
  EXPECT_TRUE(contains(train, "| `train.adafactor.epsilon1` | number | 1e-30 |")) << train;
  EXPECT_TRUE(contains(train, "| `train.steps` | integer | 1000 | 0 .. 10^12 |")) << train;
  const std::string block = config::markdown_block("x", "T\n");
  EXPECT_EQ(block, "<!-- BEGIN GENERATED: x -->\nT\n<!-- END GENERATED: x -->\n");
}

TEST(ConfigSchema, ValueTextReadsBackExactly) {
  for (double v : {0.0, 0.1, 1.0 / 3.0, 1e-30, 1e-8, 10000.0, 1e15, 0.999999, 2.5e-7})
    EXPECT_EQ(std::stod(config::value_text(v)), v) << config::value_text(v);
  EXPECT_EQ(config::value_text(10000.0), "10000");
  EXPECT_EQ(config::value_text(0.001), "0.001");
  EXPECT_EQ(config::value_text(1e-30), "1e-30");
  EXPECT_EQ(config::value_text(std::int64_t{-3}), "-3");
  EXPECT_EQ(config::value_text(true), "true");
}

// program.*: the defaults are ProgramOptions' (what MTK did before the section existed), every
// key round-trips, unknown keys and bad values are named, and a recorded config compares key by
// key with whether each change can change numerics.
TEST(ConfigSchema, ProgramSectionDefaultsRoundTripAndChanges) {
  const auto s = config::read_training_settings(yaml("{}"));
  EXPECT_TRUE(s.program == ProgramOptions());
  EXPECT_FALSE(s.checkpoint_fletcher32);
  EXPECT_TRUE(s.program.overlap_collectives && s.program.node_allreduce && s.program.buffer_reuse);
  EXPECT_FALSE(s.program.overlap_halo);
  EXPECT_EQ(s.program.allreduce_bucket_mib, 4);
  EXPECT_EQ(s.program.bf16_activations, Bf16Activations::automatic);
  const auto set = config::read_training_settings(
      yaml("program: {overlap_halo: true, bf16_activations: never, allreduce_bucket_mib: 16}\n"
           "checkpoint: {fletcher32: true}\n"));
  EXPECT_TRUE(set.program.overlap_halo);
  EXPECT_EQ(set.program.bf16_activations, Bf16Activations::off);
  EXPECT_EQ(set.program.allreduce_bucket_mib, 16);
  EXPECT_TRUE(set.checkpoint_fletcher32);
  Config c = Config::from_string("{}");
  config::write_training_settings(c, set);
  for (const auto& key : config::program_schema().keys())
    EXPECT_TRUE(c.has("program." + key)) << key;
  const auto back = config::read_training_settings(Config::from_string(c.dump()));
  EXPECT_TRUE(back.program == set.program);
  EXPECT_TRUE(back.checkpoint_fletcher32);
  std::string e =
      error_of([] { config::read_training_settings(yaml("program: {overlap_hallo: true}\n")); });
  EXPECT_TRUE(contains(e, "program.overlap_hallo")) << e;
  EXPECT_TRUE(contains(e, "overlap_halo")) << e;
  e = error_of([] { config::read_training_settings(yaml("program: {bf16_activations: 1}\n")); });
  EXPECT_TRUE(contains(e, "program.bf16_activations")) << e;
  EXPECT_TRUE(config::program_changes(c, set.program).empty());
  ProgramOptions now = set.program;
  now.node_allreduce = false;
  now.buffer_plan = false;
  const auto changes = config::program_changes(c, now);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].key, "program.node_allreduce");
  EXPECT_EQ(changes[0].was, "true");
  EXPECT_EQ(changes[0].now, "false");
  EXPECT_FALSE(changes[0].numerics.empty());
  EXPECT_EQ(changes[1].key, "program.buffer_plan");
  EXPECT_TRUE(changes[1].numerics.empty());
  // A record from before the section: its defaults.
  EXPECT_EQ(config::program_changes(yaml("{}"), ProgramOptions()).size(), 0u);
}
