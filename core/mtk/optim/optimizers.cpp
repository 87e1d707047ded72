#include <mtk/graph/autodiff.hpp>
#include <mtk/base/error.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/optimizers.hpp>

#include <algorithm>
#include <cmath>

namespace mtk {
namespace {

Tensor slot(const Tensor& var, const std::string& suffix, const Shape& shape) {
  return variable(var.graph(), var.name() + "/" + suffix, shape, Initializer::zeros(), false);
}

Shape without(const Shape& s, const std::vector<std::string>& drop) {
  std::vector<Dimension> dims;
  for (const auto& d : s.dims())
    if (std::find(drop.begin(), drop.end(), d.name) == drop.end())
      dims.push_back(d);
  return Shape(dims);
}

Tensor scalar(Graph& g, double v) {
  return constant(g, Shape(), v);
}

// sqrt(mean(x^2)) over every element.
Tensor rms(const Tensor& x) {
  return sqrt(reduce_mean(square(x)));
}

}  // namespace

Tensor global_step(Graph& g) {
  for (int i : g.variable_ops())
    if (g.op(i).name == "global_step")
      return g.tensor(g.op(i).outputs[0]);
  return variable(g, "global_step", Shape(), Initializer::zeros(), false);
}

Tensor LearningRateSchedule::build(const Tensor& step) const {
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

std::vector<std::string> Adafactor::factored_dims(const Shape& shape) const {
  if (!o_.factored || shape.rank() < 2)
    return {};
  std::vector<Dimension> dims = shape.dims();
  std::stable_sort(dims.begin(), dims.end(),
                   [](const Dimension& a, const Dimension& b) { return a.size > b.size; });
  if (dims[1].size < o_.min_dim_size_to_factor)
    return {};
  return {dims[0].name, dims[1].name};
}

void Adafactor::apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads,
                      const Tensor& step, const Tensor& lr) {
  if (vars.size() != grads.size())
    fail("mtk::Adafactor::apply", "one gradient per variable");
  Graph& g = step.graph();
  // decay = 1 - (step + 1)^-0.8
  Tensor decay = add(negative(pow(add(step, 1.0), -o_.decay_exponent)), 1.0);
  Tensor keep = add(negative(decay), 1.0);  // 1 - decay
  for (size_t k = 0; k < vars.size(); ++k) {
    const Tensor& var = vars[k];
    const Tensor& grad = grads[k];
    Tensor g2 = add(square(grad), o_.epsilon1);
    Tensor update;
    auto fd = factored_dims(var.shape());
    if (!fd.empty()) {
      // d1 = largest ("rows"), d2 = second largest ("cols"): vr drops d2, vc drops d1.
      const std::string d1 = fd[0], d2 = fd[1];
      Tensor vr = slot(var, "adafactor_vr", without(var.shape(), {d2}));
      Tensor vc = slot(var, "adafactor_vc", without(var.shape(), {d1}));
      Tensor new_vr = decay * vr + keep * reduce_mean(g2, {d2});
      Tensor new_vc = decay * vc + keep * reduce_mean(g2, {d1});
      assign(vr, new_vr);
      assign(vc, new_vc);
      Tensor long_term_mean = reduce_mean(new_vr, {d1});
      Tensor r_factor = rsqrt(new_vr / long_term_mean);
      Tensor c_factor = rsqrt(new_vc);
      update = grad * r_factor * c_factor;
    } else {
      Tensor v = slot(var, "adafactor_v", var.shape());
      Tensor new_v = decay * v + keep * g2;
      assign(v, new_v);
      update = grad * rsqrt(new_v);
    }
    if (o_.clipping_threshold > 0.0) {
      Tensor clip = maximum(multiply(rms(update), 1.0 / o_.clipping_threshold), scalar(g, 1.0));
      update = update / clip;
    }
    Tensor scale = lr;
    if (o_.parameter_scaling)
      scale = lr * maximum(rms(var), scalar(g, o_.epsilon2));
    if (o_.beta1 > 0.0) {
      Tensor m = slot(var, "adafactor_m", var.shape());
      Tensor new_m = multiply(m, o_.beta1) + multiply(update, 1.0 - o_.beta1);
      assign(m, new_m);
      update = new_m;
    }
    assign_sub(var, update * scale);
  }
}

void Adam::apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads,
                 const Tensor& step, const Tensor& lr) {
  if (vars.size() != grads.size())
    fail("mtk::Adam::apply", "one gradient per variable");
  Tensor t = add(step, 1.0);
  // Bias corrections 1 - beta^t, as exp(t * log(beta)).
  Tensor c1 = add(negative(exp(multiply(t, std::log(o_.beta1)))), 1.0);
  Tensor c2 = add(negative(exp(multiply(t, std::log(o_.beta2)))), 1.0);
  Tensor step_size = lr * sqrt(c2) / c1;
  for (size_t k = 0; k < vars.size(); ++k) {
    const Tensor& var = vars[k];
    Tensor m = slot(var, "adam_m", var.shape()), v = slot(var, "adam_v", var.shape());
    // One fused kernel per variable instead of a dozen elementwise passes.
    auto next = adam_update(var, m, v, grads[k], step_size, o_.beta1, o_.beta2, o_.epsilon);
    assign(m, next[1]);
    assign(v, next[2]);
    assign(var, next[0]);
  }
}

void Sgd::apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor&,
                const Tensor& lr) {
  for (size_t k = 0; k < vars.size(); ++k)
    assign_sub(vars[k], grads[k] * lr);
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

}  // namespace mtk
