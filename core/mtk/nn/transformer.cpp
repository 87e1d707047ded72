#include <mtk/base/error.hpp>
#include <mtk/nn/impl/transformer_builder.hpp>
#include <mtk/nn/impl/weights.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/loss.hpp>
#include <mtk/ops/reduce.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/softmax.hpp>
#include <mtk/ops/sources.hpp>

#include <string>
#include <vector>

namespace mtk::nn {
namespace impl {

Tensor Builder::encode(ModelGraph& m, Tensor& memory_segments) {
  if (!m.encoder_inputs.valid()) {  // the decoding graphs' encoder: placeholders of its own
    const Shape tokens{batch, length};
    m.encoder_inputs = placeholder(g, "encoder_inputs", tokens, DType::int32);
    m.encoder_segments = placeholder(g, "encoder_segments", tokens, DType::int32);
    m.encoder_positions = placeholder(g, "encoder_positions", tokens, DType::int32);
  }
  memory_segments = rename_dimension(m.encoder_segments, "length", "memory_length");
  Tensor bias =
      attention_bias(g, length, memory_length, false, m.encoder_segments, memory_segments);
  int first = -1;
  Tensor x = embed_stack_input("encoder", m.encoder_inputs, m.encoder_positions,
                               c.num_encoder_layers, first);
  nonpadding = c.moe_every > 0 ? token_mask(m.encoder_segments) : Tensor();
  x = stack("encoder", c.num_encoder_layers, x, bias, first);
  return rename_dimension(x, "length", "memory_length");
}

Tensor Builder::decode(const ModelGraph& m, const Tensor& encoder_out,
                       const Tensor& memory_segments) {
  Tensor self_bias;  // local attention builds its own mask per layer, from positions
  if (c.local_attention()) {
    local_segments = m.segments;
  } else {
    Tensor self_memory_segments = rename_dimension(m.segments, "length", "memory_length");
    self_bias = attention_bias(g, length, memory_length, true, m.segments, self_memory_segments);
  }
  int first = -1;
  Tensor x = embed_stack_input("decoder", m.inputs, m.positions, c.num_layers, first);
  nonpadding = c.moe_every > 0 ? token_mask(m.segments) : Tensor();
  Tensor y =
      stack("decoder", c.num_layers, x, self_bias, first, encoder_out, m.segments, memory_segments);
  local_segments = Tensor();
  return y;
}

void Builder::loss(ModelGraph& m, const Tensor& x, bool training, double logit_scale) {
  Tensor softmax_w = impl::weight(g, "decoder/softmax", Shape{vocab, d_model}, c.d_model);
  CrossEntropyOptions ce;
  ce.label_smoothing = training ? c.label_smoothing : 0.0;
  ce.z_loss = training ? c.z_loss : 0.0;
  ce.logit_scale = logit_scale;
  if (training && c.loss_chunks > 1) {
    chunked_loss(m, x, softmax_w, ce);
    return;
  }
  m.logits = einsum({x, softmax_w}, Shape{batch, length, vocab});
  m.token_loss = softmax_cross_entropy(m.logits, m.targets, vocab, ce);
  Tensor weights =
      compare(CompareFn::not_equal, m.targets, constant(g, Shape(), 0.0, DType::int32));
  m.loss_sum = reduce_sum(m.token_loss * weights);
  m.token_count = reduce_sum(weights);
  m.aux_loss = training && aux.valid() ? aux : constant(g, Shape(), 0.0);
  m.loss = m.loss_sum / maximum(m.token_count, constant(g, Shape(), 1.0)) + m.aux_loss;
  loss_terms(m, weights, ce);
}

// model.loss_chunks > 1 (training): the logits and the cross-entropy of each slice of `length`,
// each slice but the last a recomputation segment: its logits die after its forward and are
// computed again right before its backward, so one slice's logits and their gradient are alive at
// a time. The
// sums add the slices' sums (float32 reassociation of loss_chunks = 1's); m.logits and
// m.token_loss stay empty.
void Builder::chunked_loss(ModelGraph& m, const Tensor& x, const Tensor& softmax_w,
                           const CrossEntropyOptions& ce) {
  const Tensor zero = constant(g, Shape(), 0.0, DType::int32);
  m.token_count = reduce_sum(compare(CompareFn::not_equal, m.targets, zero));
  const bool terms = ce.label_smoothing != 0.0 || ce.z_loss != 0.0;
  CrossEntropyOptions plain_ce;
  plain_ce.logit_scale = ce.logit_scale;
  const std::int64_t rows = c.length / c.loss_chunks;
  Tensor loss_sum, cross_entropy_sum, z_sum;
  auto plus = [](const Tensor& a, const Tensor& b) { return a.valid() ? a + b : b; };
  for (std::int64_t i = 0; i < c.loss_chunks; ++i) {
    Tensor part, plain_part, z_part;
    {  // the chunk's segment; the sums over chunks are built outside it. The last chunk's
       // backward runs first, right after its forward: it keeps its logits, recomputes nothing.
      RecomputeSegment chunk(g, i + 1 < c.loss_chunks);
      const Tensor xi = slice(x, "length", i * rows, rows);
      const Tensor targets = slice(m.targets, "length", i * rows, rows);
      const Tensor weights = compare(CompareFn::not_equal, targets, zero);
      const Tensor logits = einsum({xi, softmax_w}, Shape{batch, Dimension{"length", rows}, vocab});
      const Tensor token_loss = softmax_cross_entropy(logits, targets, vocab, ce);
      part = reduce_sum(token_loss * weights);
      Tensor plain = token_loss;
      plain_part = part;
      if (terms) {
        plain = softmax_cross_entropy(logits, targets, vocab, plain_ce);
        plain_part = reduce_sum(plain * weights);
      }
      if (ce.z_loss != 0.0)
        z_part = reduce_sum(square(cross_entropy_log_sum_exp(plain)) * weights);
    }
    loss_sum = plus(loss_sum, part);
    cross_entropy_sum = plus(cross_entropy_sum, plain_part);
    if (z_part.valid())
      z_sum = plus(z_sum, z_part);
  }
  m.loss_sum = loss_sum;
  m.cross_entropy_sum = cross_entropy_sum;
  m.z_loss_sum = z_sum.valid() ? multiply(z_sum, ce.z_loss) : constant(g, Shape(), 0.0);
  m.aux_loss = aux.valid() ? aux : constant(g, Shape(), 0.0);
  m.loss = m.loss_sum / maximum(m.token_count, constant(g, Shape(), 1.0)) + m.aux_loss;
}

// Built after the loss, so the graph up to it is what it was. A second fused cross-entropy
// (no gradient flows through it) only where training adds label smoothing or z-loss.
void Builder::loss_terms(ModelGraph& m, const Tensor& weights, const CrossEntropyOptions& ce) {
  m.cross_entropy_sum = m.loss_sum;
  Tensor plain = m.token_loss;
  if (ce.label_smoothing != 0.0 || ce.z_loss != 0.0) {
    CrossEntropyOptions none;
    none.logit_scale = ce.logit_scale;
    plain = softmax_cross_entropy(m.logits, m.targets, vocab, none);
    m.cross_entropy_sum = reduce_sum(plain * weights);
  }
  m.z_loss_sum =
      ce.z_loss != 0.0
          ? multiply(reduce_sum(square(cross_entropy_log_sum_exp(plain)) * weights), ce.z_loss)
          : constant(g, Shape(), 0.0);
}

}  // namespace impl

ModelGraph transformer_placeholders(Graph& g, const TransformerConfig& config) {
  config.validate();
  const Shape tokens{{"batch", config.batch}, {"length", config.length}};
  ModelGraph m;
  m.inputs = placeholder(g, "inputs", tokens, DType::int32);
  m.targets = placeholder(g, "targets", tokens, DType::int32);
  m.segments = placeholder(g, "segments", tokens, DType::int32);
  m.positions = placeholder(g, "positions", tokens, DType::int32);
  if (config.num_encoder_layers > 0) {
    m.encoder_inputs = placeholder(g, "encoder_inputs", tokens, DType::int32);
    m.encoder_segments = placeholder(g, "encoder_segments", tokens, DType::int32);
    m.encoder_positions = placeholder(g, "encoder_positions", tokens, DType::int32);
  }
  return m;
}

ModelGraph build_transformer(Graph& g, const TransformerConfig& config, bool training,
                             std::uint64_t seed, double logit_scale) {
  config.validate();
  if (logit_scale <= 0)
    fail("mtk::nn::build_transformer", cat("logit_scale ", logit_scale, " must be positive"));
  return build_transformer_on(g, config, training, transformer_placeholders(g, config), seed,
                              logit_scale);
}

ModelGraph build_transformer_on(Graph& g, const TransformerConfig& config, bool training,
                                const ModelGraph& feeds, std::uint64_t seed, double logit_scale) {
  config.validate();
  if (logit_scale <= 0)
    fail("mtk::nn::build_transformer", cat("logit_scale ", logit_scale, " must be positive"));
  const Shape tokens{{"batch", config.batch}, {"length", config.length}};
  std::vector<const Tensor*> given{&feeds.inputs, &feeds.targets, &feeds.segments,
                                   &feeds.positions};
  if (config.num_encoder_layers > 0)
    given.insert(given.end(),
                 {&feeds.encoder_inputs, &feeds.encoder_segments, &feeds.encoder_positions});
  for (const Tensor* t : given)
    if (!t->valid() || t->shape() != tokens || t->dtype() != DType::int32)
      fail("mtk::nn::build_transformer_on",
           cat("feed '", t->valid() ? t->name() : std::string("(none)"), "' ",
               t->valid() ? t->shape().to_string() : std::string(), " is not int32 ",
               tokens.to_string()));
  // Every contraction of the model (and, through each einsum's precision, of its gradients) in the
  // configured precision; what is built after the model (optimizer updates) stays float32.
  struct PrecisionScope {
    Graph& g;
    Precision saved;
    ~PrecisionScope() { g.set_contraction_precision(saved); }
  } scope{g, g.contraction_precision()};
  g.set_contraction_precision(config.contraction_precision());
  impl::Builder b(g, config, LayerContext{&g, training, config.dropout, seed});
  ModelGraph m = feeds;
  Tensor encoder_out, memory_segments;
  if (config.num_encoder_layers > 0)
    encoder_out = b.encode(m, memory_segments);
  b.loss(m, b.decode(m, encoder_out, memory_segments), training, logit_scale);
  return m;
}

std::int64_t count_parameters(const Graph& g) {
  std::int64_t n = 0;
  for (int i : g.variable_ops()) {
    const auto& op = g.op(i);
    if (g.variable_attrs(i).trainable)
      n += g.tensor_info(op.outputs[0]).shape.num_elements();
  }
  return n;
}

}  // namespace mtk::nn
