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
  double total_steps = 100000;  ///< linear_decay end
  /// The learning rate at `step` (a scalar tensor of the global step), as graph ops.
  Tensor build(const Tensor& step) const;
};

}  // namespace mtk::optim
