#include <mtk/base/error.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>
#include <mtk/optim/sgd.hpp>

namespace mtk::optim {

void Sgd::apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor&,
                const Tensor& lr) {
  if (vars.size() != grads.size())
    fail("mtk::optim::Sgd::apply", "one gradient per variable");
  store_variables(vars);
  for (size_t k = 0; k < vars.size(); ++k) {
    if (grads[k].shape() == vars[k].shape()) {
      assign_sub(vars[k], grads[k] * lr);
      continue;
    }
    // A sharded gradient (shard_gradients): update the shard, gather the variable.
    const ZeroSharding& z = sharding();
    const Tensor p = z.shard(vars[k], z.shard_dim(vars[k]), vars[k].name() + "/zero_var");
    assign(vars[k], z.unshard(p - grads[k] * lr, vars[k].shape()));
  }
}

}  // namespace mtk::optim
