#pragma once
// Local (banded causal) self-attention over a blocked length dim, so that the length may be split
// over a mesh dim (sequence parallelism): Mesh-TensorFlow's masked_local_attention_1d, with the
// window semantics of docs/spatial.md ("Local attention with a split length").

#include <mtk/nn/layer_context.hpp>

#include <cstdint>
#include <string>

namespace mtk::nn {

/// The names of the dims local attention adds: the positions of one block (queries) and the
/// widened block of keys and values (the block and the `window - 1` positions before it).
inline constexpr const char* kLocalBlockDim = "attention_block";
inline constexpr const char* kLocalMemoryDim = "attention_memory";

/// Causal local self-attention: position i of x [..., length_dim, d_model] attends to positions j
/// with i - window < j <= i (and, when `segments` [..., length_dim] int32 is given, the same
/// segment id). The length dim is written as [length_dim = length / block, attention_block =
/// block] (a row-major reshape that keeps a split of length_dim local), the keys and values of the
/// `window - 1` positions before each block come from the previous block by halo_exchange
/// (neighbouring ranks where length_dim is split), and each block's queries attend to their
/// block widened by that halo. Weights "<name>/q", "/k", "/v" [d_model, heads, d_kv] and "/o"
/// [heads, d_kv, d_model], as multihead_attention's (the same checkpoints). `block` is chosen
/// by the caller independently of the mesh, so every layout computes the same thing; it must
/// divide the length and be at least window - 1. Fails naming the tensor, dims and sizes.
Tensor local_self_attention(const LayerContext& ctx, const std::string& name, const Tensor& x,
                            const Tensor& segments, const Dimension& d_model,
                            const Dimension& heads, const Dimension& d_kv,
                            const std::string& length_dim, std::int64_t window, std::int64_t block);

/// The additive mask of local_self_attention [blocks, attention_block, attention_memory] (with
/// segments [..., blocks, attention_block] given: also their dims): 0 where query position
/// blocks * block + i may attend to the key at offset m of the widened block (global position
/// blocks * block + m - (window - 1)), -1e9 elsewhere (later positions, positions window or more
/// before, before the sequence's start, another segment).
Tensor local_attention_bias(Graph& g, const Dimension& blocks, const Dimension& block,
                            std::int64_t window, const Tensor& segments = Tensor());

}  // namespace mtk::nn
