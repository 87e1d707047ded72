#include <mtk/base/error.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/optimizer_updates.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>
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
  ZeroSharding& z = zero();
  const std::vector<Tensor> gs = z.gradients(vars, grads);
  for (size_t k = 0; k < vars.size(); ++k) {
    const Tensor& var = vars[k];
    // Sharded (d >= 0): the update reads and writes this rank's shard only (mtk/optim/zero.hpp).
    const int d = z.shard_dim(var);
    const Shape shape = z.sharded_shape(var.shape(), d);
    const Tensor p = z.shard(var, d, var.name() + "/zero_var");
    const auto m = z.slot(var, "adam_m", shape, slot_dtype());
    const auto v = z.slot(var, "adam_v", shape, slot_dtype());
    // One fused kernel per variable instead of a dozen elementwise passes.
    auto next = adam_update(p, m.value, v.value, gs[k], step_size, o_.beta1, o_.beta2, o_.epsilon);
    z.assign(m, next[1]);
    z.assign(v, next[2]);
    assign(var, z.gather_into(var, next[0]));
  }
}

}  // namespace mtk::optim
