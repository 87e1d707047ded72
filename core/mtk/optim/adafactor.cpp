#include <mtk/base/error.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/adafactor.hpp>

#include <algorithm>

namespace mtk::optim {
namespace {

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
    fail("mtk::optim::Adafactor::apply", "one gradient per variable");
  store_variables(vars);
  Graph& g = step.graph();
  // decay = 1 - (step + 1)^-0.8
  Tensor decay = add(negative(pow(add(step, 1.0), -o_.decay_exponent)), 1.0);
  Tensor keep = add(negative(decay), 1.0);  // 1 - decay
  for (size_t k = 0; k < vars.size(); ++k) {
    const Tensor& var = vars[k];
    const Tensor& grad = grads[k];
    Tensor update;
    auto fd = factored_dims(var.shape());
    if (!fd.empty()) {
      Tensor g2 = add(square(grad), o_.epsilon1);
      // d1 = largest ("rows"), d2 = second largest ("cols"): vr drops d2, vc drops d1.
      const std::string d1 = fd[0], d2 = fd[1];
      Tensor vr = slot_variable(var, "adafactor_vr", without(var.shape(), {d2}), slot_dtype());
      Tensor vc = slot_variable(var, "adafactor_vc", without(var.shape(), {d1}), slot_dtype());
      Tensor new_vr = decay * vr + keep * reduce_mean(g2, {d2});
      Tensor new_vc = decay * vc + keep * reduce_mean(g2, {d1});
      assign(vr, new_vr);
      assign(vc, new_vc);
      Tensor long_term_mean = reduce_mean(new_vr, {d1});
      Tensor r_factor = rsqrt(new_vr / long_term_mean);
      Tensor c_factor = rsqrt(new_vc);
      update = grad * r_factor * c_factor;
    } else if (o_.fused) {
      Tensor v = slot_variable(var, "adafactor_v", var.shape(), slot_dtype());
      auto next = adafactor_second_moment(v, grad, decay, o_.epsilon1);
      assign(v, next[0]);
      update = next[1];
    } else {
      Tensor v = slot_variable(var, "adafactor_v", var.shape(), slot_dtype());
      Tensor new_v = decay * v + keep * add(square(grad), o_.epsilon1);
      assign(v, new_v);
      update = grad * rsqrt(new_v);
    }
    Tensor clip;
    if (o_.clipping_threshold > 0.0)
      clip = maximum(multiply(rms(update), 1.0 / o_.clipping_threshold), scalar(g, 1.0));
    Tensor scale = lr;
    if (o_.parameter_scaling)
      scale = lr * maximum(rms(var), scalar(g, o_.epsilon2));
    if (o_.fused) {
      // One pass: clip, scale, momentum and the parameter update.
      Tensor m =
          o_.beta1 > 0.0 ? slot_variable(var, "adafactor_m", var.shape(), slot_dtype()) : Tensor();
      auto next = adafactor_apply(
          var, m, update, o_.clipping_threshold > 0.0 ? clip : scalar(g, 1.0), scale, o_.beta1);
      if (o_.beta1 > 0.0)
        assign(m, next[1]);
      assign(var, next[0]);
      continue;
    }
    if (o_.clipping_threshold > 0.0)
      update = update / clip;
    if (o_.beta1 > 0.0) {
      // Mesh-TensorFlow's order: the momentum averages the clipped, scaled update.
      Tensor m = slot_variable(var, "adafactor_m", var.shape(), slot_dtype());
      Tensor new_m = multiply(m, o_.beta1) + multiply(update * scale, 1.0 - o_.beta1);
      assign(m, new_m);
      assign_sub(var, new_m);
    } else {
      assign_sub(var, update * scale);
    }
  }
}

}  // namespace mtk::optim
