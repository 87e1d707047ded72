#pragma once
// The training loss: softmax cross-entropy with label smoothing, z-loss and logit scaling.

#include <mtk/graph/graph.hpp>

namespace mtk::nn {

struct CrossEntropyOptions {
  double label_smoothing = 0.0;
  double z_loss = 0.0;
  double logit_scale = 1.0;  ///< the paper's 0.9 at evaluation
};

/// Per-token softmax cross-entropy of logits [..., vocab] against int32 targets [...].
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const Dimension& vocab,
                             const CrossEntropyOptions& options = {});

/// The log-sum-exp of each row of the (scaled) logits that `token_loss`, a result of
/// softmax_cross_entropy, was computed from (the fused op's second output; no gradient flows).
Tensor cross_entropy_log_sum_exp(const Tensor& token_loss);

}  // namespace mtk::nn
