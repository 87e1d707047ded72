#include <mtk/base/error.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/optimizer_updates.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>
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
  ZeroSharding& z = zero();
  const std::vector<Tensor> grads_s = z.gradients(vars, grads);
  for (size_t k = 0; k < vars.size(); ++k) {
    const Tensor& var_full = vars[k];
    // Sharded (d >= 0): `var`, `grad` and the slots' values are this rank's shard, in the
    // sharded dim names (mtk/optim/zero.hpp); whole-variable means become partial sums.
    const int d = z.shard_dim(var_full);
    const Tensor var = z.shard(var_full, d, var_full.name() + "/zero_var");
    const Tensor& grad = grads_s[k];
    auto slot = [&](const char* suffix, const Shape& shape) {
      return z.slot(var_full, suffix, shape, slot_dtype());
    };
    Tensor update;
    auto fd = factored_dims(var.shape());
    if (!fd.empty()) {
      Tensor g2 = add(square(grad), o_.epsilon1);
      // d1 = largest ("rows"), d2 = second largest ("cols"): vr drops d2, vc drops d1.
      const std::string d1 = fd[0], d2 = fd[1];
      const auto vr = slot("adafactor_vr", without(var.shape(), {d2}));
      const auto vc = slot("adafactor_vc", without(var.shape(), {d1}));
      Tensor new_vr = decay * vr.value + keep * reduce_mean(g2, {d2});
      Tensor new_vc = decay * vc.value + keep * reduce_mean(g2, {d1});
      z.assign(vr, new_vr);
      z.assign(vc, new_vc);
      Tensor long_term_mean = reduce_mean(new_vr, {d1});
      Tensor r_factor = rsqrt(new_vr / long_term_mean);
      Tensor c_factor = rsqrt(new_vc);
      update = grad * r_factor * c_factor;
    } else if (o_.fused) {
      const auto v = slot("adafactor_v", var.shape());
      auto next = adafactor_second_moment(v.value, grad, decay, o_.epsilon1);
      z.assign(v, next[0]);
      update = next[1];
    } else {
      const auto v = slot("adafactor_v", var.shape());
      Tensor new_v = decay * v.value + keep * add(square(grad), o_.epsilon1);
      z.assign(v, new_v);
      update = grad * rsqrt(new_v);
    }
    Tensor clip;
    if (o_.clipping_threshold > 0.0)
      clip = maximum(multiply(rms(update), 1.0 / o_.clipping_threshold), scalar(g, 1.0));
    Tensor scale = lr;
    if (o_.parameter_scaling)
      scale = lr * maximum(rms(var), scalar(g, o_.epsilon2));
    const auto set_var = [&](const Tensor& value) {
      assign(var_full, z.gather_into(var_full, value));
    };
    if (o_.fused) {
      // One pass: clip, scale, momentum and the parameter update.
      const auto m = o_.beta1 > 0.0 ? slot("adafactor_m", var.shape()) : ZeroSharding::Slot();
      auto next =
          adafactor_apply(var, m.value, update, o_.clipping_threshold > 0.0 ? clip : scalar(g, 1.0),
                          scale, o_.beta1);
      if (o_.beta1 > 0.0)
        z.assign(m, next[1]);
      set_var(next[0]);
      continue;
    }
    if (o_.clipping_threshold > 0.0)
      update = update / clip;
    if (o_.beta1 > 0.0) {
      // Mesh-TensorFlow's order: the momentum averages the clipped, scaled update.
      const auto m = slot("adafactor_m", var.shape());
      Tensor new_m = multiply(m.value, o_.beta1) + multiply(update * scale, 1.0 - o_.beta1);
      z.assign(m, new_m);
      if (d < 0)
        assign_sub(var_full, new_m);
      else
        set_var(var - new_m);
    } else if (d < 0) {
      assign_sub(var_full, update * scale);
    } else {
      set_var(var - update * scale);
    }
  }
}

}  // namespace mtk::optim
