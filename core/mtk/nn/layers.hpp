#pragma once
// Neural-network layers built only from MTK's core ops, so every layer runs under any layout.
// Dimension names are the contract with the layout: `vocab`, `d_ff`, `heads`, `experts` (and
// `batch`) are the ones layouts usually split.

#include <mtk/graph/graph.hpp>
#include <mtk/ops/ops.hpp>

#include <string>

namespace mtk::layers {

/// Options every layer may need.
struct LayerContext {
  Graph* graph = nullptr;
  bool training = true;
  double dropout_rate = 0.0;
  std::uint64_t seed = 1;  ///< base seed for dropout; each call derives its own
  Tensor dropout(const Tensor& x, const std::string& name) const;
};

/// Token embedding: table [vocab, d_model] gathered at `ids`.
Tensor embedding(const LayerContext& ctx, const std::string& name, const Tensor& ids,
                 const Dimension& vocab, const Dimension& d_model);

/// Layer norm over `dim` with learned scale and bias.
Tensor layer_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                  const std::string& dim, double epsilon = 1e-6);
/// RMS norm over `dim` with learned scale (T5 / Mesh-TF "rms_norm").
Tensor rms_norm(const LayerContext& ctx, const std::string& name, const Tensor& x,
                const std::string& dim, double epsilon = 1e-6);

/// Attention bias [batch?, length, memory_length]: 0 where attending is allowed, -1e9 elsewhere.
/// Causal masks compare positions; packed sequences compare segment ids (when given).
Tensor attention_bias(Graph& g, const Dimension& length, const Dimension& memory_length,
                      bool causal, const Tensor& query_segment = Tensor(),
                      const Tensor& memory_segment = Tensor());

/// Multi-head attention: x [..., length, d_model] attends to memory [..., memory_length, d_model]
/// (memory = x for self-attention, renamed to memory_length by the caller or here).
Tensor multihead_attention(const LayerContext& ctx, const std::string& name, const Tensor& x,
                           const Tensor& memory, const Tensor& bias, const Dimension& d_model,
                           const Dimension& heads, const Dimension& d_kv,
                           const std::string& length_dim, const std::string& memory_length_dim);

/// relu(x W1) W2 with a `d_ff` hidden dim (gelu when `gelu`).
Tensor dense_relu_dense(const LayerContext& ctx, const std::string& name, const Tensor& x,
                        const Dimension& d_model, const Dimension& d_ff, bool gelu = false);

struct MoeOptions {
  int num_experts = 16;
  double capacity_factor_train = 1.25;
  double capacity_factor_eval = 2.0;
  double loss_coefficient = 1e-2;
};

struct MoeResult {
  Tensor output;    ///< same shape as x
  Tensor aux_loss;  ///< scalar load-balancing loss (already scaled by the coefficient)
  Tensor combine;   ///< [batch, length, experts_unsplit, expert_capacity] routing weights
};

/// Mixture of experts (Mesh-TensorFlow moe v1): each sequence of x [batch, length, d_model] is a
/// group; top-2 gating with capacity; dispatch/combine via one_hot and cumsum; experts' FFN weights
/// carry an `experts` dim; tokens move from batch-split to experts-split by a relayout (an
/// alltoall when `experts` and `batch` share a mesh dim).
MoeResult mixture_of_experts(const LayerContext& ctx, const std::string& name, const Tensor& x,
                             const Dimension& d_model, const Dimension& d_ff,
                             const MoeOptions& options);

struct CrossEntropyOptions {
  double label_smoothing = 0.0;
  double z_loss = 0.0;
  double logit_scale = 1.0;  ///< the paper's 0.9 at evaluation
};

/// Per-token softmax cross-entropy of logits [..., vocab] against int32 targets [...].
Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& targets, const Dimension& vocab,
                             const CrossEntropyOptions& options = {});

}  // namespace mtk::layers
