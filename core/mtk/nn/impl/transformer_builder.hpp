#pragma once
// The Transformer builder shared by build_transformer (transformer.cpp) and the step-wise decoding
// graphs (decoding_graphs.cpp): the dims, the pre-norm blocks, the encoder and the decoder. Private
// to nn.

#include <mtk/nn/attention.hpp>
#include <mtk/nn/cross_entropy.hpp>
#include <mtk/nn/embedding.hpp>
#include <mtk/nn/feed_forward.hpp>
#include <mtk/nn/local_attention.hpp>
#include <mtk/nn/moe.hpp>
#include <mtk/nn/normalization.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/indexing.hpp>
#include <mtk/ops/normalization.hpp>
#include <mtk/ops/sources.hpp>

#include <string>

namespace mtk::nn::impl {

// Sets the graph's recomputation tag for the ops built in its lifetime, then restores it.
class RecomputeTagScope {
 public:
  RecomputeTagScope(Graph& g, RecomputeTag tag) : g_(g), saved_(g.recompute_tag()) {
    g_.set_recompute_tag(tag);
  }
  ~RecomputeTagScope() { g_.set_recompute_tag(saved_); }
  RecomputeTagScope(const RecomputeTagScope&) = delete;
  RecomputeTagScope& operator=(const RecomputeTagScope&) = delete;

 private:
  Graph& g_;
  RecomputeTag saved_;
};

// The ops built in its lifetime form one recomputation segment (when `on`): the backward computes
// their outputs again instead of keeping them (TransformerConfig::recompute). With `join` >= 0 they
// join segment `join`, whose other ops were built in an earlier scope. With `replay` false they
// keep their outputs, but for those built under a tag with replay set (the norms, Builder::norm).
class RecomputeSegment {
 public:
  RecomputeSegment(Graph& g, bool on, int join = -1, bool replay = true)
      : g_(g),
        scope_(g, on ? RecomputeTag{join >= 0 ? join : g.new_recompute_segment(), false, replay}
                     : g.recompute_tag()) {}
  /// The segment its ops join (-1: none).
  int segment() const { return g_.recompute_tag().segment; }

 private:
  Graph& g_;
  RecomputeTagScope scope_;
};

// Builds one model: the dims every layer shares, the pre-norm residual blocks, the encoder, the
// decoder and the loss. Variable names ("decoder/layer_0/self_attention/q", ...) are what
// checkpoints store.
struct Builder {
  Builder(Graph& graph, const TransformerConfig& config, const LayerContext& context)
      : g(graph), c(config), ctx(context) {
    g.offer_split(batch.name);  // data parallelism
  }
  Graph& g;
  const TransformerConfig& c;
  LayerContext ctx;
  Dimension batch{"batch", c.batch}, length{"length", c.length}, d_model{"d_model", c.d_model},
      d_ff{"d_ff", c.d_ff}, heads{"heads", c.num_heads}, d_kv{"d_kv", c.d_kv},
      vocab{"vocab", c.vocab_size}, max_length{"max_length", c.length},
      memory_length{"memory_length", c.length};
  Tensor aux;  ///< the sum of the MoE layers' load-balancing losses
  /// 1 on tokens, 0 on padding ([batch, length]) of the stack being built: the MoE layers route
  /// tokens only. Invalid in the decoding graphs, whose positions are all tokens.
  Tensor nonpadding;
  /// The decoder's segment ids [batch, length] while its stack is built with local
  /// self-attention (TransformerConfig::local_attention()); invalid otherwise (full attention).
  Tensor local_segments;

  // 1.0 where segment ids are > 0 (tokens), 0.0 on padding.
  Tensor token_mask(const Tensor& segments) {
    return greater(segments, constant(g, Shape(), 0.0, DType::int32));  // float32 0/1
  }

  // Within a segment the norm's ops run again in its backward even where the segment keeps its
  // other ops' outputs: a norm's output is one elementwise pass over its input, which the backward
  // keeps anyway.
  Tensor norm(const std::string& name, const Tensor& x) {
    RecomputeTag tag = g.recompute_tag();
    tag.replay = true;
    RecomputeTagScope replayed(g, tag);
    return c.norm == "rms_norm" ? rms_norm(ctx, name, x, "d_model")
                                : layer_norm(ctx, name, x, "d_model");
  }

  // The token and position embeddings of `prefix` ("encoder", "decoder"); with
  // shared_embedding both read the tables "shared/embedding" and "shared/positions", whose
  // gradients then sum both uses.
  Tensor embed(const std::string& prefix, const Tensor& ids, const Tensor& positions) {
    const std::string tables = c.shared_embedding ? "shared" : prefix;
    Tensor x = embedding(ctx, tables + "/embedding", ids, vocab, d_model);
    const std::string pos_name = tables + "/positions";
    Tensor pos = g.has_variable(pos_name)
                     ? g.variable(pos_name)
                     : variable(g, pos_name, Shape{max_length, d_model}, Initializer::normal(0.1f));
    return ctx.dropout(x + gather(pos, positions, "max_length"), prefix + "/embedding_dropout");
  }

  Tensor feed_forward(const std::string& name, std::int64_t layer, const Tensor& x) {
    if (c.is_moe_layer(layer)) {
      auto r = mixture_of_experts(ctx, name + "/moe", x, d_model, d_ff, c.moe, nonpadding);
      aux = aux.valid() ? aux + r.aux_loss : r.aux_loss;
      return r.output;
    }
    return dense_relu_dense(ctx, name + "/ffn", x, d_model, d_ff, c.gelu);
  }

  Tensor attention(const std::string& name, const Tensor& x, const Tensor& memory,
                   const Tensor& bias) {
    return multihead_attention(ctx, name, x, memory, bias, d_model, heads, d_kv, "length",
                               "memory_length");
  }

  Tensor residual(const std::string& name, const Tensor& x, const Tensor& y) {
    return x + ctx.dropout(y, name + "/residual_dropout");
  }

  // x + self_attention(norm(x)): the first block of every layer.
  Tensor self_attention_block(const std::string& name, const Tensor& x, const Tensor& bias) {
    Tensor h = norm(name + "/norm_1", x);
    const std::string sa = name + "/self_attention";
    if (local_segments.valid())  // blocks fixed by the config (any mesh: the same blocks)
      return residual(sa, x,
                      local_self_attention(ctx, sa, h, local_segments, d_model, heads, d_kv,
                                           "length", c.attention_window, c.local_block()));
    return residual(sa, x, attention(sa, h, h, bias));
  }

  // x + feed_forward(norm(x)): the last block of every layer.
  Tensor feed_forward_block(const std::string& name, std::int64_t layer, const Tensor& x) {
    return residual(name + "/ffn", x, feed_forward(name, layer, norm(name + "/norm_2", x)));
  }

  // Encoder-decoder attention of the decoder states x [batch, length, d_model] (query segment ids
  // `segments`) to the encoder output (segment ids `memory_segments` along memory_length).
  Tensor encdec_attention_block(const std::string& name, const Tensor& x, const Tensor& encoder_out,
                                const Tensor& segments, const Tensor& memory_segments) {
    // Built per layer, as before, so that graphs (and their op names) stay the same.
    Tensor bias = attention_bias(g, length, memory_length, false, segments, memory_segments);
    Tensor y =
        attention(name + "/encdec_attention", norm(name + "/norm_encdec", x), encoder_out, bias);
    return residual(name + "/encdec_attention", x, y);
  }

  // The embedding of `prefix`'s ids and positions (embed()); under `layer` recomputation in the
  // segment the first layer of the stack joins (`segment`), so that its output, the first layer's
  // input, is gathered again from the ids for that layer's backward instead of kept.
  Tensor embed_stack_input(const std::string& prefix, const Tensor& ids, const Tensor& positions,
                           std::int64_t num_layers, int& segment) {
    RecomputeSegment first(g, c.recompute == Recompute::layer && num_layers > 0);
    segment = first.segment();
    return embed(prefix, ids, positions);
  }

  // `num_layers` pre-norm layers "<prefix>/layer_<l>" over x and the final norm; the decoder of an
  // encoder-decoder also attends to `encoder_out` (when valid). Under `layer` recomputation the
  // first layer joins segment `first` (embed_stack_input) and the final norm is in the last
  // layer's segment: the last layer's output is made again for the norm's backward, not kept
  // through the loss head.
  Tensor stack(const std::string& prefix, std::int64_t num_layers, Tensor x, const Tensor& bias,
               int first, const Tensor& encoder_out = Tensor(), const Tensor& segments = Tensor(),
               const Tensor& memory_segments = Tensor()) {
    const bool layers = c.recompute == Recompute::layer;
    const bool blocks = c.recompute == Recompute::attention;
    // Blocks whose norms alone run again: every block under `norms`, the feed-forward ones
    // under `attention`.
    const bool norms = c.recompute == Recompute::norms || blocks;
    for (std::int64_t l = 0; l < num_layers; ++l) {
      const std::string name = prefix + "/layer_" + std::to_string(l);
      RecomputeSegment layer(g, layers, l == 0 ? first : -1);
      {
        RecomputeSegment block(g, norms, -1, blocks);
        x = self_attention_block(name, x, bias);
      }
      if (encoder_out.valid()) {
        RecomputeSegment block(g, norms, -1, blocks);
        x = encdec_attention_block(name, x, encoder_out, segments, memory_segments);
      }
      {
        RecomputeSegment block(g, norms, -1, false);
        x = feed_forward_block(name, l, x);
      }
      if (l + 1 == num_layers)
        return norm(prefix + "/final_norm", x);
    }
    return norm(prefix + "/final_norm", x);
  }

  // The encoder over m's encoder placeholders; returns its output renamed to memory_length and
  // sets `memory_segments` to the encoder's segment ids along memory_length.
  Tensor encode(ModelGraph& m, Tensor& memory_segments);
  // The decoder over m's placeholders, attending to `encoder_out` when it is valid.
  Tensor decode(const ModelGraph& m, const Tensor& encoder_out, const Tensor& memory_segments);
  // Logits and losses of the final decoder states `x`.
  void loss(ModelGraph& m, const Tensor& x, bool training, double logit_scale);
  // loss() for training with model.loss_chunks > 1: the head in slices of `length`.
  void chunked_loss(ModelGraph& m, const Tensor& x, const Tensor& softmax_w,
                    const CrossEntropyOptions& ce);
  // The plain cross-entropy and z-loss sums of m's loss built with `ce`, for metrics.
  void loss_terms(ModelGraph& m, const Tensor& weights, const CrossEntropyOptions& ce);
};

}  // namespace mtk::nn::impl
