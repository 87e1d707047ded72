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

/// One projection of multi-head attention: x [..., d_model] times weight "<name>/<which>"
/// [d_model, heads, d_kv] (which: "q", "k" or "v"), giving [..., heads, d_kv]; queries are scaled
/// by 1/sqrt(d_kv) as in multihead_attention. Step-wise decoding projects each new position once
/// and keeps the keys and values.
Tensor attention_projection(const LayerContext& ctx, const std::string& name,
                            const std::string& which, const Tensor& x, const Dimension& d_model,
                            const Dimension& heads, const Dimension& d_kv);

/// The rest of multi-head attention over keys and values already projected: queries q
/// [..., heads, d_kv] (from attention_projection) attend to k, v [..., memory_length_dim, heads,
/// d_kv], whose other dims are some of q's (a cache without the beam dim serves every beam);
/// `bias` is added to the logits [q's dims but d_kv, memory_length_dim]; the result is projected
/// by "<name>/o" [heads, d_kv, d_model] to q's dims but heads and d_kv, plus d_model. With the
/// keys and values of multihead_attention it computes the same values.
Tensor attention_over_memory(const LayerContext& ctx, const std::string& name, const Tensor& q,
                             const Tensor& k, const Tensor& v, const Tensor& bias,
                             const std::string& memory_length_dim, const Dimension& d_model,
                             const Dimension& heads, const Dimension& d_kv);

}  // namespace mtk::nn
