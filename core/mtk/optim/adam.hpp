#pragma once
// Adam (Kingma & Ba 2015), bias-corrected, one fused kernel per variable.

#include <mtk/optim/optimizer.hpp>

#include <vector>

namespace mtk::optim {

struct AdamOptions {
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
};

class Adam : public Optimizer {
 public:
  explicit Adam(AdamOptions o = {}) : o_(o) {}
  void apply(const std::vector<Tensor>& vars, const std::vector<Tensor>& grads, const Tensor& step,
             const Tensor& lr) override;

 private:
  AdamOptions o_;
};

}  // namespace mtk::optim
