#pragma once
// The paper's model sizes (Mesh-TensorFlow, Shazeer et al. 2018): the LM1B language models and the
// WMT translation models, numbered as Mesh-TensorFlow's mtf_transformer_paper_lm / _tr hparams.

#include <mtk/nn/transformer_config.hpp>

namespace mtk::nn {

/// Language model of size -1..5: decoder-only, 6 layers, d_model 1024, d_kv 256, 32k vocab,
/// batch 256 x 256 tokens; d_ff 4096 and 4 heads at size -1, then d_ff 8192 x 2^size and
/// 8 x 2^size heads (0.14B to 4.9B parameters). Throws for another size.
TransformerConfig paper_lm(int size);

/// Translation model of size -1..4: encoder-decoder, 6 + 6 layers, d_model 1024, d_kv 128, 32k
/// vocab, batch 128 x 256 tokens, label smoothing 0.1; d_ff 2048 and 4 heads at size -1, then
/// d_ff 4096 x 2^size and 8 x 2^size heads. Throws for another size.
TransformerConfig paper_translation(int size);

}  // namespace mtk::nn
