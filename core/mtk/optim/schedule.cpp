#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/optim/schedule.hpp>

#include <algorithm>

namespace mtk::optim {
namespace {

Tensor scalar(Graph& g, double v) {
  return constant(g, Shape(), v);
}

}  // namespace

Tensor LearningRateSchedule::build(const Tensor& step) const {
  Tensor rate = base_rate(step);
  if (cooldown_steps <= 0 || kind == Kind::linear_decay)
    return rate;
  // min(1, (total - step) / cooldown), at least 0: unchanged until the cool-down starts.
  Tensor left = multiply(add(negative(step), total_steps), 1.0 / cooldown_steps);
  return multiply(rate,
                  maximum(minimum(left, scalar(step.graph(), 1.0)), scalar(step.graph(), 0.0)));
}

Tensor LearningRateSchedule::base_rate(const Tensor& step) const {
  Graph& g = step.graph();
  switch (kind) {
    case Kind::constant:
      return scalar(g, value);
    case Kind::rsqrt_decay:
      return rsqrt(maximum(step, scalar(g, std::max(1.0, warmup_steps))));
    case Kind::linear_decay: {
      // Linear warm-up to `value`, then linear decay to 0 at total_steps.
      Tensor up = multiply(step, value / std::max(1.0, warmup_steps));
      Tensor down = multiply(add(negative(step), total_steps),
                             value / std::max(1.0, total_steps - warmup_steps));
      return maximum(minimum(up, down), scalar(g, 0.0));
    }
    case Kind::adafactor_relative:
      return minimum(rsqrt(add(step, 1.0)), scalar(g, value));
  }
  return scalar(g, value);
}

}  // namespace mtk::optim
