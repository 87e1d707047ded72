#pragma once
// The training graph of a Transformer: the model, its gradients and the optimizer's updates, with
// the batch run whole or as microbatches (train.microbatches, docs/memory.md).

#include <mtk/nn/transformer.hpp>
#include <mtk/nn/transformer_config.hpp>
#include <mtk/optim/optimizer.hpp>
#include <mtk/optim/schedule.hpp>

#include <cstdint>

namespace mtk::nn {

/// A built training step.
struct TrainingGraph {
  /// The placeholders of the whole batch (config.batch sequences) and its losses: loss, loss_sum,
  /// cross_entropy_sum, z_loss_sum, token_count and aux_loss. With microbatches, logits and
  /// token_loss are empty (each slice has its own).
  ModelGraph model;
  Tensor lr;             ///< the learning rate (optim::minimize)
  Tensor gradient_norm;  ///< the global norm of the batch's gradients
};

/// Builds `config`'s model in training, its gradients and `optimizer`'s updates.
///
/// `microbatches` = 1: build_transformer and optim::minimize, as before. k > 1: the batch runs as
/// k slices of config.batch / k sequences in series (rows [i B/k, (i+1) B/k) of the fed batch);
/// each slice's forward is followed by its backward, so only one slice's activations are alive
/// at a time; the slices' gradients are summed (a partial sum over the batch's mesh dims stays
/// pending through the sum, so data-parallel gradients are allreduced once, after the last slice)
/// and the optimizer steps once. The loss is the batch's: the slices' token losses summed over
/// the batch's token count, plus the mean of their MoE load-balancing losses. Dense models equal
/// k = 1 up to float32 reassociation; dropout masks and MoE routing capacities are per slice.
TrainingGraph build_training(Graph& g, const TransformerConfig& config, int microbatches,
                             optim::Optimizer& optimizer,
                             const optim::LearningRateSchedule& schedule, std::uint64_t seed = 1);

}  // namespace mtk::nn
