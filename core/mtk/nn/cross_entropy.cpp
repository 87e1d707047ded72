#include <mtk/base/error.hpp>
#include <mtk/nn/cross_entropy.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/loss.hpp>

#include <string>

namespace mtk::nn {

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const Dimension& vocab,
                             const CrossEntropyOptions& options) {
  Tensor scaled = options.logit_scale == 1.0 ? logits : multiply(logits, options.logit_scale);
  // The op (mtk::softmax_cross_entropy), not this layer.
  return mtk::softmax_cross_entropy(scaled, targets, vocab.name, options.label_smoothing,
                                    options.z_loss);
}

Tensor cross_entropy_log_sum_exp(const Tensor& token_loss) {
  return mtk::softmax_cross_entropy_log_sum_exp(token_loss);
}

}  // namespace mtk::nn
