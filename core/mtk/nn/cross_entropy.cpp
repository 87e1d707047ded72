#include <mtk/nn/cross_entropy.hpp>
#include <mtk/ops/ops.hpp>

namespace mtk::nn {

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const Dimension& vocab,
                             const CrossEntropyOptions& options) {
  Tensor scaled = options.logit_scale == 1.0 ? logits : multiply(logits, options.logit_scale);
  // The op (mtk::softmax_cross_entropy), not this layer.
  return mtk::softmax_cross_entropy(scaled, targets, vocab.name, options.label_smoothing,
                                    options.z_loss);
}

}  // namespace mtk::nn
