#pragma once
// The optimizer and learning-rate settings of the `train` section: which optimizer
// (train.optimizer, the names written once, in optimizer_config.cpp), every hyperparameter of its
// options struct (train.adafactor.*, train.adam.*; SGD has none), and the learning-rate schedule
// (train.learning_rate.*), and how variables and slots are stored (train.variable_dtype,
// train.variable_rounding, train.optimizer_slot_dtype) and whether the update is sharded
// (train.shard_optimizer). Defaults are the option structs' own.

#include <mtk/config/schema.hpp>
#include <mtk/optim/optim.hpp>

#include <memory>
#include <string>
#include <vector>

namespace mtk::config {

/// Which optimizer, with the hyperparameters of each (only the chosen one's are used).
struct OptimizerSettings {
  std::string name = "adafactor";
  optim::AdafactorOptions adafactor;
  optim::AdamOptions adam;
  /// train.variable_dtype: how the trained variables are stored (Mesh-TF's master dtype).
  DType variable_dtype = DType::float32;
  /// train.variable_rounding: how updates round into bfloat16 variables (stochastic needs
  /// variable_dtype bfloat16).
  Rounding variable_rounding = Rounding::nearest;
  /// train.optimizer_slot_dtype: how the optimizer's slots are stored (Adam's m and v,
  /// Adafactor's second moments and momentum).
  DType slot_dtype = DType::float32;
  /// train.shard_optimizer: the sharded update over the data-parallel mesh dim
  /// (docs/sharded-optimizer.md; the application calls Optimizer::set_sharding).
  bool shard = false;
};

/// The optimizers train.optimizer may name: adafactor, adam, sgd.
const std::vector<std::string>& optimizer_names();
/// Whether optimizer `name` has a subsection of hyperparameters (train.<name>.*).
bool optimizer_has_options(const std::string& name);
/// The optimizer `settings` name, with its hyperparameters.
std::unique_ptr<optim::Optimizer> make_optimizer(const OptimizerSettings& settings);

/// `optimizer` (the name) and the subsections `adafactor` and `adam`.
const Schema<OptimizerSettings>& optimizer_schema();
/// Every member of optim::AdafactorOptions.
const Schema<optim::AdafactorOptions>& adafactor_schema();
/// Every member of optim::AdamOptions.
const Schema<optim::AdamOptions>& adam_schema();
/// schedule, value, warmup_steps, total_steps of optim::LearningRateSchedule.
const Schema<optim::LearningRateSchedule>& learning_rate_schema();

}  // namespace mtk::config
