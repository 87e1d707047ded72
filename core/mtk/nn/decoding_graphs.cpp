#include <mtk/base/error.hpp>
#include <mtk/nn/attention.hpp>
#include <mtk/nn/decoding_graphs.hpp>
#include <mtk/nn/impl/transformer_builder.hpp>
#include <mtk/nn/impl/weights.hpp>
#include <mtk/ops/einsum.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/shape.hpp>
#include <mtk/ops/softmax.hpp>
#include <mtk/ops/sources.hpp>
#include <mtk/ops/state.hpp>

#include <algorithm>
#include <string>

namespace mtk::nn {
namespace {

void check_dense(const TransformerConfig& config, const char* where) {
  config.validate();
  if (config.moe_every > 0)
    fail(where, cat("model.moe_every = ", config.moe_every,
                    ": step-wise decoding supports dense models only (a mixture of experts routes "
                    "by the whole sequence)"));
}

std::string state_name(std::int64_t layer, const std::string& what) {
  return std::string(decoding_state_prefix()) + "layer_" + std::to_string(layer) + "/" + what;
}

// The builder of build_transformer with the decoding sizes; position tables keep the model's
// length so that their weights match the training graph's.
struct DecodingBuilder {
  DecodingBuilder(Graph& g, const TransformerConfig& config, const DecodingShape& s)
      : c(sized(config, s)), b(g, c, LayerContext{&g, false, 0.0, 1}) {
    b.max_length = Dimension{"max_length", config.length};
  }
  static TransformerConfig sized(TransformerConfig c, const DecodingShape& s) {
    c.batch = s.batch;
    c.length = s.source_length;
    return c;
  }
  TransformerConfig c;  // sized copy the builder refers to (declared first: built first)
  impl::Builder b;
};

// What a step does to the self-attention caches of `cache` slots. Position p lives in slot
// p mod C: C = max_length is the plain cache (slot p), C = W a ring of the last W positions.
struct CacheSlots {
  Tensor keep;  // 1 where the slot holds an earlier position of this decode
  Tensor here;  // one-hot: the slot this position is written to
  Tensor bias;  // -1e9 where the slot holds no position the query attends to
};

CacheSlots cache_slots(Graph& g, const Tensor& position_id, const Dimension& cache,
                       std::int64_t window) {
  auto scalar = [&](double v) { return constant(g, Shape(), v); };
  const Tensor size = constant(g, Shape(), double(cache.size), DType::int32);
  const Tensor slot = position_id - (position_id / size) * size;  // int32: exact
  const Tensor position = cast(position_id, DType::float32), at = cast(slot, DType::float32);
  const Tensor slots = cast(range(g, cache), DType::float32);
  // Steps since each slot was written, (slot - s) mod C; more than `position`: not this decode's.
  const Tensor age = at - slots + multiply(greater(slots, at), double(cache.size));
  CacheSlots r;
  r.keep = greater(age, scalar(0.5)) * less(age, add(position, 0.5));
  r.here = one_hot(slot, cache);
  // The causal mask of the training graph (later positions), and, as there, a window's.
  r.bias = multiply(greater(age, position), -1e9);
  if (window > 0 && window < cache.size)  // a full cache: positions W or more back
    r.bias = r.bias + multiply(greater(age, scalar(double(window) - 0.5)), -1e9);
  return r;
}

}  // namespace

std::int64_t DecodingShape::cache_length(const TransformerConfig& config) const {
  const std::int64_t window = config.attention_window;
  return window > 0 && !full_cache ? std::min(window, max_length) : max_length;
}

DecodingShape DecodingShape::resolved(const TransformerConfig& config) const {
  const char* where = "mtk::nn::DecodingShape";
  DecodingShape s = *this;
  if (s.source_length == 0)
    s.source_length = config.length;
  if (s.max_length == 0)
    s.max_length = config.length;
  if (s.batch < 1)
    fail(where, cat("batch = ", s.batch, " must be >= 1"));
  if (s.beam < 1)
    fail(where, cat("beam = ", s.beam, " must be >= 1"));
  if (s.source_length < 1 || s.source_length > config.length)
    fail(where, cat("source_length = ", s.source_length,
                    " not in [1, model.length = ", config.length, "]"));
  if (s.max_length < 1 || s.max_length > config.length)
    fail(where, cat("max_length = ", s.max_length, " not in [1, model.length = ", config.length,
                    "] (the position table's size)"));
  return s;
}

bool is_decoding_state(const std::string& name) {
  return name.rfind(decoding_state_prefix(), 0) == 0;
}

DecodingEncoderGraph build_decoding_encoder(Graph& g, const TransformerConfig& config,
                                            const DecodingShape& shape) {
  const char* where = "mtk::nn::build_decoding_encoder";
  check_dense(config, where);
  if (config.num_encoder_layers <= 0)
    fail(where, "the model has no encoder (model.num_encoder_layers = 0)");
  DecodingBuilder db(g, config, shape.resolved(config));
  impl::Builder& b = db.b;
  ModelGraph m;
  Tensor memory_segments;
  DecodingEncoderGraph r;
  r.output = b.encode(m, memory_segments);
  r.inputs = m.encoder_inputs;
  r.segments = m.encoder_segments;
  r.positions = m.encoder_positions;
  const Shape memory{b.batch, b.memory_length, b.heads, b.d_kv};
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    const std::string name = "decoder/layer_" + std::to_string(l) + "/encdec_attention";
    for (const char* which : {"k", "v"}) {
      Tensor value = attention_projection(b.ctx, name, which, r.output, b.d_model, b.heads, b.d_kv);
      Tensor state =
          variable(g, state_name(l, std::string("encdec_attention/") + which + "_memory"), memory,
                   Initializer::zeros(), false);
      assign(state, einsum({value}, memory));
      (which[0] == 'k' ? r.memory_keys : r.memory_values).push_back(state);
    }
  }
  // The decoder's query segment is 1: the training graph's mask for a one-sequence row.
  const Shape bias_shape{b.batch, b.memory_length};
  Tensor bias = attention_bias(g, b.length, b.memory_length, false,
                               constant(g, Shape(), 1.0, DType::int32), memory_segments);
  r.memory_bias = variable(g, std::string(decoding_state_prefix()) + "encdec_bias", bias_shape,
                           Initializer::zeros(), false);
  assign(r.memory_bias, broadcast(bias, bias_shape));
  return r;
}

DecoderStepGraph build_decoder_step(Graph& g, const TransformerConfig& config,
                                    const DecodingShape& shape) {
  const char* where = "mtk::nn::build_decoder_step";
  check_dense(config, where);
  const DecodingShape s = shape.resolved(config);
  DecodingBuilder db(g, config, s);
  impl::Builder& b = db.b;
  const bool encdec = config.num_encoder_layers > 0;
  const Dimension beam{"beam", s.beam}, parent{"beam_parent", s.beam},
      cache{"cache_length", s.cache_length(config)};
  DecoderStepGraph r;
  r.tokens = placeholder(g, "step_tokens", Shape{b.batch, beam}, DType::int32);
  r.parents = placeholder(g, "step_parents", Shape{b.batch, beam}, DType::int32);
  r.position = placeholder(g, "step_position", Shape(), DType::int32);

  const Shape cache_shape{b.batch, beam, cache, b.heads, b.d_kv};
  Tensor reorder = one_hot(r.parents, parent);  // [batch, beam, beam_parent]
  const CacheSlots slots = cache_slots(g, r.position, cache, config.attention_window);
  // The cache reordered by parent, cleared but for earlier positions, with `fresh` written.
  auto update = [&](const Tensor& state, const Tensor& fresh) {
    Tensor old = einsum({reorder, rename_dimension(state, "beam", "beam_parent")}, cache_shape);
    Tensor next = binary(BinaryFn::add, binary(BinaryFn::multiply, old, slots.keep, &cache_shape),
                         binary(BinaryFn::multiply, fresh, slots.here, &cache_shape), &cache_shape);
    assign(state, next);
    return next;
  };

  if (encdec) {
    const Shape memory{b.batch, b.memory_length, b.heads, b.d_kv};
    for (std::int64_t l = 0; l < config.num_layers; ++l)
      for (const char* which : {"k", "v"})
        (which[0] == 'k' ? r.memory_keys : r.memory_values)
            .push_back(variable(g,
                                state_name(l, std::string("encdec_attention/") + which + "_memory"),
                                memory, Initializer::zeros(), false));
    r.memory_bias = variable(g, std::string(decoding_state_prefix()) + "encdec_bias",
                             Shape{b.batch, b.memory_length}, Initializer::zeros(), false);
  }

  Tensor x = b.embed("decoder", r.tokens, r.position);  // [batch, beam, d_model]
  for (std::int64_t l = 0; l < config.num_layers; ++l) {
    const std::string name = "decoder/layer_" + std::to_string(l);
    const std::string sa = name + "/self_attention";
    Tensor key_cache = variable(g, state_name(l, "self_attention/k_cache"), cache_shape,
                                Initializer::zeros(), false);
    Tensor value_cache = variable(g, state_name(l, "self_attention/v_cache"), cache_shape,
                                  Initializer::zeros(), false);
    r.key_caches.push_back(key_cache);
    r.value_caches.push_back(value_cache);
    Tensor h = b.norm(name + "/norm_1", x);
    Tensor q = attention_projection(b.ctx, sa, "q", h, b.d_model, b.heads, b.d_kv);
    Tensor k =
        update(key_cache, attention_projection(b.ctx, sa, "k", h, b.d_model, b.heads, b.d_kv));
    Tensor v =
        update(value_cache, attention_projection(b.ctx, sa, "v", h, b.d_model, b.heads, b.d_kv));
    x = b.residual(sa, x,
                   attention_over_memory(b.ctx, sa, q, k, v, slots.bias, "cache_length", b.d_model,
                                         b.heads, b.d_kv));
    if (encdec) {
      const std::string ea = name + "/encdec_attention";
      Tensor qe = attention_projection(b.ctx, ea, "q", b.norm(name + "/norm_encdec", x), b.d_model,
                                       b.heads, b.d_kv);
      const auto li = static_cast<size_t>(l);
      x = b.residual(
          ea, x,
          attention_over_memory(b.ctx, ea, qe, r.memory_keys[li], r.memory_values[li],
                                r.memory_bias, "memory_length", b.d_model, b.heads, b.d_kv));
    }
    x = b.feed_forward_block(name, l, x);
  }
  x = b.norm("decoder/final_norm", x);
  Tensor softmax_w = impl::weight(g, "decoder/softmax", Shape{b.vocab, b.d_model}, config.d_model);
  r.logits = einsum({x, softmax_w}, Shape{b.batch, beam, b.vocab});
  return r;
}

}  // namespace mtk::nn
