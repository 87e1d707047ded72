#pragma once
// Small Transformers for tests, built in one place: a test starts from tiny_transformer() and
// changes only the fields its check is about.

#include <mtk/nn/transformer_config.hpp>

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

}  // namespace mtk::test
