#pragma once
// The sizes and options of a Transformer (decoder-only or encoder-decoder, dense or MoE).

#include <mtk/base/precision.hpp>
#include <mtk/nn/moe.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mtk::nn {

/// What the backward recomputes from a layer's input instead of keeping from the forward
/// (docs/memory.md): nothing; the norms' outputs; the attention blocks (norm, attention,
/// residual) and the feed-forward blocks' norms; or every layer. Results are bitwise those of
/// `none` (the same steps run again).
enum class Recompute { none, norms, attention, layer };
/// The names of the values (`model.recompute`): none, norms, attention, layer.
const std::vector<std::pair<std::string, Recompute>>& recompute_names();
const char* to_string(Recompute r);

struct TransformerConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t d_model = 512;
  std::int64_t d_ff = 2048;
  std::int64_t num_heads = 8;
  std::int64_t d_kv = 64;
  std::int64_t num_layers = 6;          ///< decoder layers
  std::int64_t num_encoder_layers = 0;  ///< > 0: encoder-decoder
  /// Encoder and decoder share one embedding table and one position table (T2T's
  /// shared_embedding, as the paper's translation models do); needs an encoder.
  bool shared_embedding = false;
  std::int64_t length = 256;  ///< sequence length (packed)
  std::int64_t batch = 8;     ///< sequences per step, over all ranks
  double dropout = 0.0;
  double label_smoothing = 0.0;
  double z_loss = 0.0;
  bool gelu = false;
  std::string norm = "layer_norm";  ///< or "rms_norm"
  int moe_every = 0;                ///< every n-th feed-forward layer is a mixture of experts
  MoeOptions moe;
  /// "float32" or "bfloat16": the precision of every contraction of the model and its gradients
  /// (bf16 operands, fp32 sums). Variables, optimizer state, loss, softmax statistics and the
  /// activations between contractions stay float32.
  std::string activation_dtype = "float32";
  /// Activations recomputed in the backward instead of kept (training graphs only). `norms` by
  /// default: one elementwise pass per norm buys back every norm's output (docs/memory.md).
  Recompute recompute = Recompute::norms;
  /// > 1: training graphs compute the logits and the cross-entropy in this many slices of
  /// `length` (docs/memory.md, "Chunked loss head"), all but the last a recomputation segment, so
  /// that one slice's logits and their gradient are alive at a time; the loss equals 1's within
  /// float32 reassociation. 1: the whole [batch, length, vocab], as before. Must divide length.
  std::int64_t loss_chunks = 1;
  /// > 0: the decoder's self-attention is local (docs/spatial.md): position i attends to
  /// positions i - attention_window < j <= i only, computed in blocks (local_attention_block)
  /// so that `length` may be split over a mesh dim. 0: full causal attention.
  std::int64_t attention_window = 0;
  /// Local attention's block: positions i of a block attend to the block and the window - 1
  /// positions before it (halo). 0: the window. At least the window; must divide length.
  std::int64_t local_attention_block = 0;

  /// The values `norm` may take: layer_norm, rms_norm.
  static const std::vector<std::string>& norm_choices();
  /// The values `activation_dtype` may take: float32, bfloat16.
  static const std::vector<std::string>& activation_dtype_choices();

  /// Checks the sizes; throws naming the key and value.
  void validate() const;
  /// validate()'s checks of attention_window and local_attention_block.
  void check_local_attention(const char* where) const;
  /// Whether the decoder's self-attention is built as local attention (a window shorter than the
  /// length; a window of the length or more is full causal attention, built as such).
  bool local_attention() const { return attention_window > 0 && attention_window < length; }
  /// The block local attention runs in: local_attention_block, or the window when it is 0.
  std::int64_t local_block() const {
    return local_attention_block > 0 ? local_attention_block : attention_window;
  }
  /// Whether feed-forward layer `layer` (0-based, in encoder or decoder) is a mixture of experts.
  bool is_moe_layer(std::int64_t layer) const;
  /// The contraction precision activation_dtype names.
  Precision contraction_precision() const;
  /// Parameters of the model this config builds, by formula (no graph, no memory).
  std::int64_t analytic_parameter_count() const;
  std::string to_string() const;
};

}  // namespace mtk::nn
