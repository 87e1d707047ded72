#pragma once
// Step-wise (incremental) decoding graphs of the Transformer: an encoder graph run once per batch
// of sources, and a decoder step graph that computes one position per run from the keys and values
// of the earlier positions kept in the program (state variables updated in place by assign), so a
// new token costs one decoder step instead of a pass over the whole prefix. Weights carry the names
// of build_transformer's, so a training checkpoint or program fills them (mtk::decode copies them
// by name). Runtime, caches and beam search: mtk/decode/.

#include <mtk/graph/graph.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::nn {

/// The sizes of the decoding graphs (the model's sizes come from its TransformerConfig).
struct DecodingShape {
  std::int64_t batch = 1;          ///< rows (source sentences / prompts) per run, over all ranks
  std::int64_t beam = 1;           ///< hypotheses per row
  std::int64_t source_length = 0;  ///< encoder positions; 0: config.length (1..config.length)
  std::int64_t max_length = 0;     ///< decoder positions kept; 0: config.length (1..config.length)
  /// With model.attention_window W, the self-attention caches keep only the last W positions (a
  /// ring buffer, docs/models.md#decoding); true keeps all max_length (the reference for tests).
  bool full_cache = false;

  /// Positions each decoder layer's self-attention cache holds: min(W, max_length) with a window
  /// (and not full_cache), else max_length. For a resolved shape.
  std::int64_t cache_length(const TransformerConfig& config) const;

  /// The shape with its defaults resolved against `config`; throws naming a bad value.
  DecodingShape resolved(const TransformerConfig& config) const;
};

/// Prefix of the non-trainable state variables of the decoding graphs ("decoding/..."): caches
/// and encoder memories, never in a checkpoint and never copied as weights.
inline const char* decoding_state_prefix() {
  return "decoding/";
}
/// Whether variable `name` is decoding state rather than a model weight.
bool is_decoding_state(const std::string& name);

/// The encoder graph of an encoder-decoder model for decoding. Running it writes, for every
/// decoder layer l, the encoder-decoder attention keys and values of the encoder output into the
/// state variables "decoding/layer_<l>/encdec_attention/{k,v}_memory" [batch, memory_length,
/// heads, d_kv] and the memory mask into "decoding/encdec_bias" [batch, memory_length] (0 where the
/// source has a token, i.e. segment id 1; -1e9 at padding, segment 0). The decoder step graph holds
/// state variables of the same names and shapes; copy them over after each run.
struct DecodingEncoderGraph {
  Tensor inputs;     ///< int32 [batch, length] source ids (0-padded)
  Tensor segments;   ///< int32 [batch, length]: 1 on tokens, 0 on padding
  Tensor positions;  ///< int32 [batch, length]: 0, 1, 2, ...
  Tensor output;     ///< [batch, memory_length, d_model] the encoder output
  std::vector<Tensor> memory_keys, memory_values;  ///< the state variables, per decoder layer
  Tensor memory_bias;                              ///< the state variable [batch, memory_length]
};

/// Builds the encoder graph (`shape.batch` rows of `shape.source_length` positions). Throws for a
/// decoder-only or mixture-of-experts config.
DecodingEncoderGraph build_decoding_encoder(Graph& g, const TransformerConfig& config,
                                            const DecodingShape& shape);

/// One decoder step for every hypothesis [batch, beam]. A run first reorders the key/value caches
/// of each row by `parents` (hypothesis k continues the one in slot parents[b, k] of the previous
/// step; identity at position 0), clears the slots that hold no earlier position of this decode,
/// writes the keys and values of `tokens` into slot `position` mod cache_length and returns the
/// next-token logits. The caches are the state variables
/// "decoding/layer_<l>/self_attention/{k,v}_cache" [batch, beam, cache_length, heads, d_kv]
/// (cache_length = shape.cache_length(config): max_length, or the window: a ring buffer of the
/// last W positions), updated in place at the end of each run. With an encoder, the
/// hypotheses of a row attend to the memories the encoder graph wrote (shared by the beams).
/// Equivalent to the full decoder of build_transformer at that position, for a row holding one
/// sequence (segment 1, positions 0, 1, ...).
struct DecoderStepGraph {
  Tensor tokens;    ///< int32 [batch, beam]: the input token at `position` (0 = start at 0)
  Tensor parents;   ///< int32 [batch, beam]: slot 0..beam-1 of each hypothesis' parent
  Tensor position;  ///< int32 scalar: the position decoded, 0..max_length-1
  Tensor logits;    ///< [batch, beam, vocab] the next-token logits
  std::vector<Tensor> key_caches, value_caches;    ///< the state variables, per decoder layer
  std::vector<Tensor> memory_keys, memory_values;  ///< encoder-decoder only (state variables)
  Tensor memory_bias;                              ///< encoder-decoder only (state variable)
};

/// Builds the decoder step graph of a decoder-only or encoder-decoder config. Throws for a
/// mixture-of-experts config (its routing depends on the whole sequence).
DecoderStepGraph build_decoder_step(Graph& g, const TransformerConfig& config,
                                    const DecodingShape& shape);

}  // namespace mtk::nn
