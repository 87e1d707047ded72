#pragma once
// Plain stochastic gradient descent: var -= lr * grad.

#include <mtk/optim/optimizer.hpp>

#include <vector>

namespace mtk::optim {

class Sgd : public Optimizer {
 public:
  void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor& step,
             const Tensor& lr) override;
};

}  // namespace mtk::optim
