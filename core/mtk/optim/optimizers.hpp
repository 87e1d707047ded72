#pragma once
// Optimizers as graph ops (as Mesh-TensorFlow does): each appends its update (and the variables for
// its slots, laid out like the parameter they belong to) to the graph; the updates are assign ops
// that take effect at the end of each Program::run.

#include <mtk/graph/graph.hpp>

#include <string>
#include <vector>

namespace mtk {

/// The global step: a non-trainable float32 scalar variable "global_step" (created once), and the
/// op that increments it each run.
Tensor global_step(Graph& g);

struct LearningRateSchedule {
  enum class Kind {
    constant,
    rsqrt_decay,
    linear_decay,
    adafactor_relative
  } kind = Kind::rsqrt_decay;
  double value = 0.01;          ///< constant value / peak for linear_decay
  double warmup_steps = 10000;  ///< rsqrt_decay: lr = 1/sqrt(max(step, warmup)); linear warm-up
  double total_steps = 100000;  ///< linear_decay end
  /// The learning rate at `step` (a scalar tensor of the global step), as graph ops.
  Tensor build(const Tensor& step) const;
};

struct AdafactorOptions {
  double beta1 = 0.0;               ///< momentum; 0 keeps no first moment
  double decay_exponent = 0.8;      ///< decay rate 1 - (step + 1)^-0.8
  double clipping_threshold = 1.0;  ///< update clipping on RMS(update)
  double epsilon1 = 1e-30;
  double epsilon2 = 1e-3;
  bool parameter_scaling = true;
  bool factored = true;
  std::int64_t min_dim_size_to_factor = 128;
};

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

/// The optimizers' shared interface: append updates of `vars` given their gradients.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Appends the update ops; `step` is the global step before this update, `lr` the learning rate.
  virtual void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads,
                     const Tensor& step, const Tensor& lr) = 0;
};

class Adafactor : public Optimizer {
 public:
  explicit Adafactor(AdafactorOptions o = {}) : o_(o) {}
  void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor& step,
             const Tensor& lr) override;
  /// The two dims Adafactor factors for `shape` (the two largest, both >= min size), or {} if
  /// it keeps a full second moment.
  std::vector<std::string> factored_dims(const Shape& shape) const;

 private:
  AdafactorOptions o_;
};

class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions o = {}) : o_(o) {}
  void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor& step,
             const Tensor& lr) override;

 private:
  AdamOptions o_;
};

class Sgd : public Optimizer {
 public:
  void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor& step,
             const Tensor& lr) override;
};

/// Appends gradients of `loss` and the optimizer's updates for every trainable variable, the
/// learning-rate schedule and the global-step increment. Returns the learning-rate tensor.
Tensor minimize(const Tensor& loss, Optimizer& optimizer, const LearningRateSchedule& schedule);

}  // namespace mtk
