#pragma once
// Learning-rate schedules: the learning rate as graph ops of the global step.

#include <mtk/graph/graph.hpp>

namespace mtk::optim {

struct LearningRateSchedule {
  enum class Kind {
    constant,
    rsqrt_decay,
    linear_decay,
    adafactor_relative
  } kind = Kind::rsqrt_decay;
  double value = 0.01;          ///< constant value / peak for linear_decay
  double warmup_steps = 10000;  ///< rsqrt_decay: lr = 1/sqrt(max(step, warmup)); linear warm-up
  double total_steps = 100000;  ///< linear_decay end; the end of the cool-down
  /// constant, rsqrt_decay, adafactor_relative: the rate falls linearly to 0 over the last
  /// cooldown_steps before total_steps (0: no cool-down; the warm-up-stable-decay shape).
  double cooldown_steps = 0;
  /// The learning rate at `step` (a scalar tensor of the global step), as graph ops.
  Tensor build(const Tensor& step) const;

 private:
  Tensor base_rate(const Tensor& step) const;
};

}  // namespace mtk::optim
