#pragma once
// The paper's models from MTK's layers: a decoder-only language model (LM1B) and an
// encoder-decoder (WMT), with dense or mixture-of-experts feed-forward layers.

#include <mtk/graph/graph.hpp>
#include <mtk/nn/layers.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk {

struct TransformerConfig {
  std::int64_t vocab_size = 32000;
  std::int64_t d_model = 512;
  std::int64_t d_ff = 2048;
  std::int64_t num_heads = 8;
  std::int64_t d_kv = 64;
  std::int64_t num_layers = 6;          ///< decoder layers
  std::int64_t num_encoder_layers = 0;  ///< > 0: encoder-decoder
  std::int64_t length = 256;            ///< sequence length (packed)
  std::int64_t batch = 8;               ///< sequences per step, over all ranks
  double dropout = 0.0;
  double label_smoothing = 0.0;
  double z_loss = 0.0;
  bool gelu = false;
  std::string norm = "layer_norm";  ///< or "rms_norm"
  int moe_every = 0;                ///< every n-th feed-forward layer is a mixture of experts
  layers::MoeOptions moe;

  /// The paper's LM sizes -1..5 (mtf_transformer_paper_lm) and translation sizes -1..4.
  static TransformerConfig paper_lm(int size);
  static TransformerConfig paper_translation(int size);
  /// Checks the sizes; throws naming the key and value.
  void validate() const;
  /// Parameters of the model this config builds, by formula (no graph, no memory).
  std::int64_t analytic_parameter_count() const;
  std::string to_string() const;
};

/// Placeholders and outputs of a built model. Feed int32 [batch, length] tensors.
struct ModelGraph {
  Tensor inputs, targets, segments, positions;                 ///< decoder side
  Tensor encoder_inputs, encoder_segments, encoder_positions;  ///< encoder-decoder only
  Tensor logits;                                               ///< [batch, length, vocab]
  Tensor token_loss;   ///< [batch, length] per-token cross-entropy
  Tensor loss_sum;     ///< sum of token losses over non-padding targets
  Tensor token_count;  ///< number of non-padding targets
  Tensor aux_loss;     ///< MoE load-balancing loss (0 for dense models)
  Tensor loss;         ///< loss_sum / token_count + aux_loss: what training minimises
};

/// Builds the model's forward graph. `training` selects dropout and the MoE capacity factor;
/// `logit_scale` multiplies logits in the loss (the paper's 0.9 at evaluation).
ModelGraph build_transformer(Graph& g, const TransformerConfig& config, bool training,
                             std::uint64_t seed = 1, double logit_scale = 1.0);

/// Number of trainable parameters in a graph (from variable shapes; nothing is allocated).
std::int64_t count_parameters(const Graph& g);

}  // namespace mtk
