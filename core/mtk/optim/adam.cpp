#include <mtk/base/error.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/adam.hpp>

#include <cmath>

namespace mtk::optim {

void Adam::apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads,
                 const Tensor& step, const Tensor& lr) {
  if (vars.size() != grads.size())
    fail("mtk::optim::Adam::apply", "one gradient per variable");
  store_variables(vars);
  Tensor t = add(step, 1.0);
  // Bias corrections 1 - beta^t, as exp(t * log(beta)).
  Tensor c1 = add(negative(exp(multiply(t, std::log(o_.beta1)))), 1.0);
  Tensor c2 = add(negative(exp(multiply(t, std::log(o_.beta2)))), 1.0);
  Tensor step_size = lr * sqrt(c2) / c1;
  for (size_t k = 0; k < vars.size(); ++k) {
    const Tensor& var = vars[k];
    Tensor m = slot_variable(var, "adam_m", var.shape(), slot_dtype());
    Tensor v = slot_variable(var, "adam_v", var.shape(), slot_dtype());
    // One fused kernel per variable instead of a dozen elementwise passes.
    auto next = adam_update(var, m, v, grads[k], step_size, o_.beta1, o_.beta2, o_.epsilon);
    assign(m, next[1]);
    assign(v, next[2]);
    assign(var, next[0]);
  }
}

}  // namespace mtk::optim
