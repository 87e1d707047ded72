#include <mtk/autodiff/gradients.hpp>
#include <mtk/base/error.hpp>
#include <mtk/nn/training_graph.hpp>
#include <mtk/ops/ops.hpp>

#include <string>
#include <vector>

namespace mtk::nn {

namespace {

// Rows [begin, begin + rows) of every fed tensor of `whole`.
ModelGraph slice_feeds(const ModelGraph& whole, std::int64_t begin, std::int64_t rows) {
  auto cut = [&](const Tensor& t) { return t.valid() ? slice(t, "batch", begin, rows) : t; };
  ModelGraph m;
  m.inputs = cut(whole.inputs);
  m.targets = cut(whole.targets);
  m.segments = cut(whole.segments);
  m.positions = cut(whole.positions);
  m.encoder_inputs = cut(whole.encoder_inputs);
  m.encoder_segments = cut(whole.encoder_segments);
  m.encoder_positions = cut(whole.encoder_positions);
  return m;
}

Tensor plus(const Tensor& a, const Tensor& b) {
  return a.valid() ? a + b : b;
}

}  // namespace

TrainingGraph build_training(Graph& g, const TransformerConfig& config, int microbatches,
                             optim::Optimizer& optimizer,
                             const optim::LearningRateSchedule& schedule, std::uint64_t seed) {
  const char* where = "mtk::nn::build_training";
  TrainingGraph t;
  if (microbatches < 1 || config.batch % microbatches != 0)
    fail(where, cat("train.microbatches = ", microbatches,
                    " must be >= 1 and divide model.batch = ", config.batch, " (dim 'batch')"));
  if (microbatches == 1) {
    t.model = build_transformer(g, config, /*training=*/true, seed);
    t.lr = optim::minimize(t.model.loss, optimizer, schedule, &t.gradient_norm);
    return t;
  }
  const std::int64_t rows = config.batch / microbatches;
  ModelGraph& whole = t.model;
  whole = transformer_placeholders(g, config);
  // The batch's token count, as build_transformer counts it.
  whole.token_count = reduce_sum(
      compare(CompareFn::not_equal, whole.targets, constant(g, Shape(), 0.0, DType::int32)));
  const Tensor denominator = maximum(whole.token_count, constant(g, Shape(), 1.0));
  const double share = 1.0 / microbatches;
  TransformerConfig slice_config = config;
  slice_config.batch = rows;
  std::vector<Tensor> grads;
  Tensor loss_sum, cross_entropy_sum, z_loss_sum, aux_loss;
  // Slices after the first share its variables.
  struct ReuseScope {
    Graph& g;
    ~ReuseScope() { g.set_reuse_variables(false); }
  } reuse{g};
  for (int i = 0; i < microbatches; ++i) {
    g.set_reuse_variables(i > 0);
    const ModelGraph m =
        build_transformer_on(g, slice_config, /*training=*/true, slice_feeds(whole, i * rows, rows),
                             i == 0 ? seed : seed ^ (0x9E3779B97F4A7C15ull * (i + 1)));
    // This slice's share of the batch's loss, differentiated now: its activations die before
    // the next slice runs.
    const Tensor loss = m.loss_sum / denominator + multiply(m.aux_loss, share);
    // Each part of this slice's gradients is added to the earlier slices' sum as it is made.
    grads = gradients(loss, g.trainable_variables(), grads);
    loss_sum = plus(loss_sum, m.loss_sum);
    cross_entropy_sum = plus(cross_entropy_sum, m.cross_entropy_sum);
    z_loss_sum = plus(z_loss_sum, m.z_loss_sum);
    aux_loss = plus(aux_loss, multiply(m.aux_loss, share));
  }
  g.set_reuse_variables(false);
  whole.loss_sum = loss_sum;
  whole.cross_entropy_sum = cross_entropy_sum;
  whole.z_loss_sum = z_loss_sum;
  whole.aux_loss = aux_loss;
  whole.loss = loss_sum / denominator + aux_loss;
  t.gradient_norm = optim::global_norm(grads);
  Tensor step = optim::global_step(g);
  t.lr = schedule.build(step);
  optimizer.apply(g.trainable_variables(), grads, step, t.lr);
  assign_add(step, constant(g, Shape(), 1.0));
  return t;
}

}  // namespace mtk::nn
