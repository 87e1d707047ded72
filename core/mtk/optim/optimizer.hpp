#pragma once
// Optimizers as graph ops (as Mesh-TensorFlow does): each appends its update (and the variables for
// its slots, laid out like the parameter they belong to) to the graph; the updates are assign ops
// that take effect at the end of each Program::run. This file holds what all optimizers share.

#include <mtk/graph/graph.hpp>
#include <mtk/optim/schedule.hpp>
#include <mtk/optim/zero.hpp>

#include <string>
#include <vector>

namespace mtk::optim {

/// The optimizers' shared interface: append updates of `vars` given their gradients.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Appends the update ops; `step` is the global step before this update, `lr` the learning rate.
  /// Stores `vars` as variable_dtype() first (Graph::set_variable_storage).
  virtual void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads,
                     const Tensor& step, const Tensor& lr) = 0;
  /// How the trained variables (Mesh-TF's master dtype) and the optimizer's slots are stored:
  /// float32 or bfloat16 (read as float32, updates computed in float32 and rounded to nearest
  /// even, or for bfloat16 variables stochastically: `variable_rounding`). Gradients stay float32.
  void set_state_dtypes(DType variables, DType slots,
                        Rounding variable_rounding = Rounding::nearest);
  DType variable_dtype() const { return variable_dtype_; }
  DType slot_dtype() const { return slot_dtype_; }
  Rounding variable_rounding() const { return variable_rounding_; }
  /// Updates variables replicated over the data-parallel mesh dim by shards (mtk/optim/zero.hpp,
  /// docs/sharded-optimizer.md); off until called. Lower the graph with layout_rules().
  void set_sharding(ShardOptions o) { zero_ = ZeroSharding(std::move(o)); }
  const ZeroSharding& sharding() const { return zero_; }
  /// `base` plus the per-tensor rules of the slots apply() stored split (base when none).
  LayoutRules layout_rules(const LayoutRules& base) const { return zero_.layout_rules(base); }
  /// The gradients apply() reads: sharded ones for sharded variables (ZeroSharding::gradients).
  std::vector<Tensor> shard_gradients(const std::vector<Tensor>& vars,
                                      const std::vector<Tensor>& grads) const {
    return zero_.gradients(vars, grads);
  }

 protected:
  /// Stores each of `vars` as variable_dtype(), rounded by variable_rounding().
  void store_variables(const std::vector<Tensor>& vars) const;
  ZeroSharding& zero() { return zero_; }

 private:
  DType variable_dtype_ = DType::float32;
  DType slot_dtype_ = DType::float32;
  Rounding variable_rounding_ = Rounding::nearest;
  ZeroSharding zero_;
};

/// The global step: a non-trainable float32 scalar variable "global_step" (created once).
Tensor global_step(Graph& g);

/// An optimizer slot of `var`: a non-trainable variable "<var>/<suffix>" of `shape`, zero at start
/// (checkpoints store it under that name), stored as `storage` (float32 or bfloat16).
Tensor slot_variable(const Tensor& var, const std::string& suffix, const Shape& shape,
                     DType storage = DType::float32);

/// The global L2 norm of `tensors` (Mesh-TF's clip_by_global_norm): the square root of the sum of
/// the squares of all their values, a float32 scalar. Each tensor is reduced whole, so on any mesh
/// and layout every value counts once: split slices are summed over their mesh dims, replicated
/// slices are not added again.
Tensor global_norm(const std::vector<Tensor>& tensors);

/// Appends gradients of `loss` and the optimizer's updates for every trainable variable, the
/// learning-rate schedule and the global-step increment. Returns the learning-rate tensor.
/// `gradient_norm` (optional) receives global_norm() of the gradients, which training logs (of the
/// sharded gradients when the optimizer shards: the same norm, its sum of squares reassociated).
Tensor minimize(const Tensor& loss, Optimizer& optimizer, const LearningRateSchedule& schedule,
                Tensor* gradient_norm = nullptr);

}  // namespace mtk::optim
