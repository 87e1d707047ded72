#include <mtk/base/error.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/optim/sgd.hpp>

namespace mtk::optim {

void Sgd::apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor&,
                const Tensor& lr) {
  if (vars.size() != grads.size())
    fail("mtk::optim::Sgd::apply", "one gradient per variable");
  store_variables(vars);
  for (size_t k = 0; k < vars.size(); ++k)
    assign_sub(vars[k], grads[k] * lr);
}

}  // namespace mtk::optim
