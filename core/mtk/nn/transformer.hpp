#pragma once
// The paper's models from MTK's layers: a decoder-only language model (LM1B) and an
// encoder-decoder (WMT), with dense or mixture-of-experts feed-forward layers.

#include <mtk/graph/graph.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <cstdint>

namespace mtk::nn {

/// Placeholders and outputs of a built model. Feed int32 [batch, length] tensors.
struct ModelGraph {
  Tensor inputs, targets, segments, positions;                 ///< decoder side
  Tensor encoder_inputs, encoder_segments, encoder_positions;  ///< encoder-decoder only
  Tensor logits;                                               ///< [batch, length, vocab]
  /// [batch, length] per-token loss: the cross-entropy, in training with label smoothing and
  /// z-loss
  Tensor token_loss;
  Tensor loss_sum;           ///< sum of token_loss over non-padding targets
  Tensor cross_entropy_sum;  ///< sum of the plain cross-entropy (log-perplexity x token_count)
  Tensor z_loss_sum;         ///< the z-loss part of loss_sum (0 unless training with z_loss)
  Tensor token_count;        ///< number of non-padding targets
  Tensor aux_loss;           ///< MoE load-balancing loss (0 for dense models and evaluation)
  Tensor loss;               ///< loss_sum / token_count + aux_loss: what training minimises
};

/// Builds the model's forward graph. `training` selects dropout, the MoE capacity factor and the
/// training-only terms (label smoothing, z-loss, MoE load-balancing loss): with training = false,
/// loss_sum is the plain cross-entropy. `logit_scale` multiplies logits in the loss (the paper's
/// 0.9 at evaluation).
ModelGraph build_transformer(Graph& g, const TransformerConfig& config, bool training,
                             std::uint64_t seed = 1, double logit_scale = 1.0);

/// The placeholders build_transformer makes for `config` (int32 [batch, length]: inputs, targets,
/// segments, positions, and the encoder's when it has one); the other fields are empty.
ModelGraph transformer_placeholders(Graph& g, const TransformerConfig& config);

/// build_transformer on the tensors `feeds` gives as placeholders (int32 [batch, length] with
/// config's sizes; e.g. slices of a larger batch, as microbatches are): returns them with the
/// model's outputs.
ModelGraph build_transformer_on(Graph& g, const TransformerConfig& config, bool training,
                                const ModelGraph& feeds, std::uint64_t seed = 1,
                                double logit_scale = 1.0);

/// Number of trainable parameters in a graph (from variable shapes; nothing is allocated).
std::int64_t count_parameters(const Graph& g);

}  // namespace mtk::nn
