#include <mtk/graph/autodiff.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optimizer.hpp>

namespace mtk::optim {

Tensor global_step(Graph& g) {
  for (int i : g.variable_ops())
    if (g.op(i).name == "global_step")
      return g.tensor(g.op(i).outputs[0]);
  return variable(g, "global_step", Shape(), Initializer::zeros(), false);
}

Tensor slot_variable(const Tensor& var, const std::string& suffix, const Shape& shape) {
  return variable(var.graph(), var.name() + "/" + suffix, shape, Initializer::zeros(), false);
}

Tensor minimize(const Tensor& loss, Optimizer& optimizer, const LearningRateSchedule& schedule) {
  Graph& g = loss.graph();
  auto vars = g.trainable_variables();
  auto grads = gradients(loss, vars);
  Tensor step = global_step(g);
  Tensor lr = schedule.build(step);
  optimizer.apply(vars, grads, step, lr);
  assign_add(step, constant(g, Shape(), 1.0));
  return lr;
}

}  // namespace mtk::optim
