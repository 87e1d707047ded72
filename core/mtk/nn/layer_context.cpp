#include <mtk/kernels/random.hpp>
#include <mtk/nn/layer_context.hpp>
#include <mtk/ops/sources.hpp>

namespace mtk::nn {

Tensor LayerContext::dropout(const Tensor& x, const std::string& name) const {
  if (!training || dropout_rate <= 0.0)
    return x;
  return mtk::dropout(x, dropout_rate, seed ^ kernels::hash_name(name));
}

}  // namespace mtk::nn
