#pragma once
// Small Transformers for tests, built in one place: a test starts from tiny_transformer() and
// changes only the fields its check is about.

#include <mtk/nn/transformer.hpp>
#include <mtk/nn/transformer_config.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <map>
#include <vector>

namespace mtk::test {

/// The small model most tests train: 2 layers, d_model 16, d_ff 32, 8 heads of 4, vocab 32,
/// batch 8 x length 8 (every dim a layout splits is divisible by 8 ranks). `moe`: every second
/// layer a mixture of 8 experts; `encoder_decoder`: one encoder layer in front.
inline nn::TransformerConfig tiny_transformer(bool moe = false, bool encoder_decoder = false) {
  nn::TransformerConfig c;
  c.vocab_size = 32;
  c.d_model = 16;
  c.d_ff = 32;
  c.num_heads = 8;
  c.d_kv = 4;
  c.num_layers = 2;
  c.num_encoder_layers = encoder_decoder ? 1 : 0;
  c.length = 8;
  c.batch = 8;
  if (moe) {
    c.moe_every = 2;
    c.moe.num_experts = 8;
  }
  return c;
}

/// The sizes a test gives its Transformer, in TransformerConfig's field order.
struct TransformerSizes {
  std::int64_t vocab_size, d_model, d_ff, num_heads, d_kv, num_layers, length, batch;
};

/// `base` (by default tiny_transformer()) with the eight sizes of `s`; every other field is
/// base's.
inline nn::TransformerConfig sized_transformer(const TransformerSizes& s,
                                               nn::TransformerConfig base = tiny_transformer()) {
  base.vocab_size = s.vocab_size;
  base.d_model = s.d_model;
  base.d_ff = s.d_ff;
  base.num_heads = s.num_heads;
  base.d_kv = s.d_kv;
  base.num_layers = s.num_layers;
  base.length = s.length;
  base.batch = s.batch;
  return base;
}

/// A language model's four feeds for one batch of c.batch x c.length: inputs input(b, l), targets
/// target(b, l), one segment per sequence and positions 0 .. length-1.
template <class Input, class Target>
std::map<int, HostTensor> lm_feeds(const nn::ModelGraph& m, const nn::TransformerConfig& c,
                                   Input input, Target target) {
  const Shape s{{"batch", c.batch}, {"length", c.length}};
  std::vector<std::int32_t> in, tg, seg(static_cast<size_t>(c.batch * c.length), 1), pos;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      in.push_back(static_cast<std::int32_t>(input(b, l)));
      tg.push_back(static_cast<std::int32_t>(target(b, l)));
      pos.push_back(static_cast<std::int32_t>(l));
    }
  return {{m.inputs.id(), HostTensor::ints(s, in)},
          {m.targets.id(), HostTensor::ints(s, tg)},
          {m.segments.id(), HostTensor::ints(s, seg)},
          {m.positions.id(), HostTensor::ints(s, pos)}};
}

}  // namespace mtk::test
