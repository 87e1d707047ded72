#include <mtk/base/error.hpp>
#include <mtk/ops/ops.hpp>
#include <mtk/nn/transformer.hpp>

#include <cmath>
#include <sstream>

namespace mtk {

TransformerConfig TransformerConfig::paper_lm(int size) {
  if (size < -1 || size > 5)
    fail("mtk::TransformerConfig::paper_lm", cat("size ", size, " is not in -1..5"));
  TransformerConfig c;
  const std::int64_t n = size >= 0 ? (std::int64_t(1) << size) : 1;
  c.vocab_size = 32000;
  c.d_model = 1024;
  c.d_ff = size == -1 ? 4096 : 8192 * n;
  c.num_heads = size == -1 ? 4 : 8 * n;
  c.d_kv = 256;
  c.num_layers = 6;
  c.length = 256;
  c.batch = 256;
  return c;
}

TransformerConfig TransformerConfig::paper_translation(int size) {
  if (size < -1 || size > 4)
    fail("mtk::TransformerConfig::paper_translation", cat("size ", size, " is not in -1..4"));
  TransformerConfig c;
  const std::int64_t n = size >= 0 ? (std::int64_t(1) << size) : 1;
  c.vocab_size = 32000;
  c.d_model = 1024;
  c.d_ff = size == -1 ? 2048 : 4096 * n;
  c.num_heads = size == -1 ? 4 : 8 * n;
  c.d_kv = 128;
  c.num_layers = 6;
  c.num_encoder_layers = 6;
  c.length = 256;
  c.batch = 128;
  c.label_smoothing = 0.1;
  return c;
}

void TransformerConfig::validate() const {
  auto positive = [](const char* key, std::int64_t v) {
    if (v <= 0)
      fail("mtk::TransformerConfig", cat("model.", key, " = ", v, " must be positive"));
  };
  positive("vocab_size", vocab_size);
  positive("d_model", d_model);
  positive("d_ff", d_ff);
  positive("num_heads", num_heads);
  positive("d_kv", d_kv);
  positive("num_layers", num_layers);
  positive("length", length);
  positive("batch", batch);
  if (num_encoder_layers < 0)
    fail("mtk::TransformerConfig", "model.num_encoder_layers must be >= 0");
  if (dropout < 0 || dropout >= 1)
    fail("mtk::TransformerConfig", cat("model.dropout = ", dropout, " not in [0, 1)"));
  if (norm != "layer_norm" && norm != "rms_norm")
    fail("mtk::TransformerConfig", cat("model.norm = '", norm, "'; use layer_norm or rms_norm"));
  if (moe_every < 0)
    fail("mtk::TransformerConfig", "model.moe_every must be >= 0");
  if (moe_every > 0 && moe.num_experts < 1)
    fail("mtk::TransformerConfig", "model.moe.num_experts must be >= 1");
}

std::int64_t TransformerConfig::analytic_parameter_count() const {
  const std::int64_t norm_params = norm == "layer_norm" ? 2 * d_model : d_model;
  const std::int64_t attention = 4 * d_model * num_heads * d_kv;
  auto ffn = [&](std::int64_t layer) {
    if (moe_every > 0 && (layer + 1) % moe_every == 0)
      return moe.num_experts * 2 * d_model * d_ff + d_model * moe.num_experts;
    return 2 * d_model * d_ff;
  };
  std::int64_t total = 0;
  for (std::int64_t l = 0; l < num_encoder_layers; ++l)
    total += attention + ffn(l) + 2 * norm_params;
  for (std::int64_t l = 0; l < num_layers; ++l)
    total += attention * (num_encoder_layers > 0 ? 2 : 1) + ffn(l) +
             (num_encoder_layers > 0 ? 3 : 2) * norm_params;
  total += norm_params * (num_encoder_layers > 0 ? 2 : 1);           // final norms
  total += vocab_size * d_model * (num_encoder_layers > 0 ? 3 : 2);  // embeddings + softmax
  total += length * d_model * (num_encoder_layers > 0 ? 2 : 1);      // positions
  return total;
}

std::string TransformerConfig::to_string() const {
  std::ostringstream os;
  os << "vocab " << vocab_size << ", d_model " << d_model << ", d_ff " << d_ff << ", heads "
     << num_heads << " x d_kv " << d_kv << ", layers " << num_layers;
  if (num_encoder_layers)
    os << " (+" << num_encoder_layers << " encoder)";
  os << ", length " << length << ", batch " << batch;
  if (moe_every)
    os << ", MoE every " << moe_every << " (" << moe.num_experts << " experts)";
  return os.str();
}

namespace {

struct Builder {
  Builder(Graph& graph, const TransformerConfig& config, const layers::LayerContext& context)
      : g(graph), c(config), ctx(context) {}
  Graph& g;
  const TransformerConfig& c;
  layers::LayerContext ctx;
  Dimension batch{"batch", c.batch}, length{"length", c.length}, d_model{"d_model", c.d_model},
      d_ff{"d_ff", c.d_ff}, heads{"heads", c.num_heads}, d_kv{"d_kv", c.d_kv},
      vocab{"vocab", c.vocab_size}, max_length{"max_length", c.length};
  Tensor aux;

  Tensor norm(const std::string& name, const Tensor& x) {
    return c.norm == "rms_norm" ? layers::rms_norm(ctx, name, x, "d_model")
                                : layers::layer_norm(ctx, name, x, "d_model");
  }

  Tensor embed(const std::string& prefix, const Tensor& ids, const Tensor& positions) {
    Tensor x = layers::embedding(ctx, prefix + "/embedding", ids, vocab, d_model);
    Tensor pos =
        variable(g, prefix + "/positions", Shape{max_length, d_model}, Initializer::normal(0.1f));
    return ctx.dropout(x + gather(pos, positions, "max_length"), prefix + "/embedding_dropout");
  }

  Tensor feed_forward(const std::string& name, std::int64_t layer, const Tensor& x) {
    if (c.moe_every > 0 && (layer + 1) % c.moe_every == 0) {
      auto r = layers::mixture_of_experts(ctx, name + "/moe", x, d_model, d_ff, c.moe);
      aux = aux.valid() ? aux + r.aux_loss : r.aux_loss;
      return r.output;
    }
    return layers::dense_relu_dense(ctx, name + "/ffn", x, d_model, d_ff, c.gelu);
  }

  Tensor self_attention(const std::string& name, const Tensor& x, const Tensor& bias) {
    return layers::multihead_attention(ctx, name, x, x, bias, d_model, heads, d_kv, "length",
                                       "memory_length");
  }

  Tensor residual(const std::string& name, const Tensor& x, const Tensor& y) {
    return x + ctx.dropout(y, name + "/residual_dropout");
  }
};

}  // namespace

ModelGraph build_transformer(Graph& g, const TransformerConfig& config, bool training,
                             std::uint64_t seed, double logit_scale) {
  config.validate();
  if (logit_scale <= 0)
    fail("mtk::build_transformer", cat("logit_scale ", logit_scale, " must be positive"));
  Builder b(g, config, layers::LayerContext{&g, training, config.dropout, seed});
  const Dimension memory_length{"memory_length", config.length};
  ModelGraph m;
  const Shape tokens{b.batch, b.length};
  m.inputs = placeholder(g, "inputs", tokens, DType::int32);
  m.targets = placeholder(g, "targets", tokens, DType::int32);
  m.segments = placeholder(g, "segments", tokens, DType::int32);
  m.positions = placeholder(g, "positions", tokens, DType::int32);

  Tensor encoder_out, encoder_segments_mem;
  if (config.num_encoder_layers > 0) {
    m.encoder_inputs = placeholder(g, "encoder_inputs", tokens, DType::int32);
    m.encoder_segments = placeholder(g, "encoder_segments", tokens, DType::int32);
    m.encoder_positions = placeholder(g, "encoder_positions", tokens, DType::int32);
    Tensor mem_seg = rename_dimension(m.encoder_segments, "length", "memory_length");
    Tensor bias =
        layers::attention_bias(g, b.length, memory_length, false, m.encoder_segments, mem_seg);
    Tensor x = b.embed("encoder", m.encoder_inputs, m.encoder_positions);
    for (std::int64_t l = 0; l < config.num_encoder_layers; ++l) {
      const std::string name = "encoder/layer_" + std::to_string(l);
      x = b.residual(name + "/self_attention", x,
                     b.self_attention(name + "/self_attention", b.norm(name + "/norm_1", x), bias));
      x = b.residual(name + "/ffn", x, b.feed_forward(name, l, b.norm(name + "/norm_2", x)));
    }
    encoder_out = rename_dimension(b.norm("encoder/final_norm", x), "length", "memory_length");
    encoder_segments_mem = mem_seg;
  }

  Tensor dec_mem_seg = rename_dimension(m.segments, "length", "memory_length");
  Tensor self_bias =
      layers::attention_bias(g, b.length, memory_length, true, m.segments, dec_mem_seg);
  Tensor x = b.embed("decoder", m.inputs, m.positions);
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    const std::string name = "decoder/layer_" + std::to_string(l);
    x = b.residual(
        name + "/self_attention", x,
        b.self_attention(name + "/self_attention", b.norm(name + "/norm_1", x), self_bias));
    if (encoder_out.valid()) {
      Tensor cross_bias = layers::attention_bias(g, b.length, memory_length, false, m.segments,
                                                 encoder_segments_mem);
      Tensor y = layers::multihead_attention(
          b.ctx, name + "/encdec_attention", b.norm(name + "/norm_encdec", x), encoder_out,
          cross_bias, b.d_model, b.heads, b.d_kv, "length", "memory_length");
      x = b.residual(name + "/encdec_attention", x, y);
    }
    x = b.residual(name + "/ffn", x, b.feed_forward(name, l, b.norm(name + "/norm_2", x)));
  }
  x = b.norm("decoder/final_norm", x);
  Tensor softmax_w = variable(g, "decoder/softmax", Shape{b.vocab, b.d_model},
                              Initializer::normal(static_cast<float>(
                                  1.0 / std::sqrt(static_cast<double>(config.d_model)))));
  m.logits = einsum({x, softmax_w}, Shape{b.batch, b.length, b.vocab});
  layers::CrossEntropyOptions ce;
  ce.label_smoothing = training ? config.label_smoothing : 0.0;
  ce.z_loss = config.z_loss;
  ce.logit_scale = logit_scale;
  m.token_loss = layers::softmax_cross_entropy(m.logits, m.targets, b.vocab, ce);
  Tensor weights =
      compare(CompareFn::not_equal, m.targets, constant(g, Shape(), 0.0, DType::int32));
  m.loss_sum = reduce_sum(m.token_loss * weights);
  m.token_count = reduce_sum(weights);
  m.aux_loss = b.aux.valid() ? b.aux : constant(g, Shape(), 0.0);
  m.loss = m.loss_sum / maximum(m.token_count, constant(g, Shape(), 1.0)) + m.aux_loss;
  return m;
}

std::int64_t count_parameters(const Graph& g) {
  std::int64_t n = 0;
  for (int i : g.variable_ops()) {
    const auto& op = g.op(i);
    if (op.attrs<VariableAttrs>().trainable)
      n += g.tensor_info(op.outputs[0]).shape.num_elements();
  }
  return n;
}

}  // namespace mtk
