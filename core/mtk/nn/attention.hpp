#pragma once
// Attention: the masking bias and multi-head attention.

#include <mtk/nn/layer_context.hpp>

#include <string>

namespace mtk::nn {

/// Attention bias [batch?, length, memory_length]: 0 where attending is allowed, -1e9 elsewhere.
/// Causal masks compare positions; packed sequences compare segment ids (when given).
Tensor attention_bias(Graph& g, const Dimension& length, const Dimension& memory_length,
                      bool causal, const Tensor& query_segment = Tensor(),
                      const Tensor& memory_segment = Tensor());

/// Multi-head attention: x [..., length, d_model] attends to memory [..., memory_length, d_model]
/// (memory = x for self-attention, renamed to memory_length by the caller or here). Weights
/// "<name>/q", "<name>/k", "<name>/v" [d_model, heads, d_kv] and "<name>/o" [heads, d_kv, d_model].
Tensor multihead_attention(const LayerContext& ctx, const std::string& name, const Tensor& x,
                           const Tensor& memory, const Tensor& bias, const Dimension& d_model,
                           const Dimension& heads, const Dimension& d_kv,
                           const std::string& length_dim, const std::string& memory_length_dim);

}  // namespace mtk::nn
