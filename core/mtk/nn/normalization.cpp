#include <mtk/nn/normalization.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/normalization.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/sources.hpp>

namespace mtk::nn {

Tensor layer_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                  const std::string& dim, double epsilon) {
  const Dimension d = x.shape().dim(dim);
  Tensor scale = variable(*ctx.graph, name + "/scale", Shape{d}, Initializer::ones());
  Tensor bias = variable(*ctx.graph, name + "/bias", Shape{d}, Initializer::zeros());
  return mtk::layer_norm(x, scale, bias, dim, epsilon);  // one fused op (ops/normalization.hpp)
}

Tensor rms_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                const std::string& dim, double epsilon) {
  const Dimension d = x.shape().dim(dim);
  Tensor scale = variable(*ctx.graph, name + "/scale", Shape{d}, Initializer::ones());
  Tensor variance = reduce_mean(square(x), {dim});
  return x * rsqrt(add(variance, epsilon)) * scale;
}

}  // namespace mtk::nn
