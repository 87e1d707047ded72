#include <mtk/base/error.hpp>
#include <mtk/nn/transformer_config.hpp>

#include <algorithm>
#include <sstream>

namespace mtk::nn {

const std::vector<std::string>& TransformerConfig::norm_choices() {
  static const std::vector<std::string> choices = {"layer_norm", "rms_norm"};
  return choices;
}

const std::vector<std::pair<std::string, Recompute>>& recompute_names() {
  static const std::vector<std::pair<std::string, Recompute>> names{
      {"none", Recompute::none},
      {"norms", Recompute::norms},
      {"attention", Recompute::attention},
      {"layer", Recompute::layer}};
  return names;
}

const char* to_string(Recompute r) {
  for (const auto& [name, value] : recompute_names())
    if (value == r)
      return name.c_str();
  return "?";
}

const std::vector<std::string>& TransformerConfig::activation_dtype_choices() {
  static const std::vector<std::string> choices = {"float32", "bfloat16"};
  return choices;
}

void TransformerConfig::validate() const {
  const char* where = "mtk::nn::TransformerConfig";
  auto positive = [where](const char* key, std::int64_t v) {
    if (v <= 0)
      fail(where, cat("model.", key, " = ", v, " must be positive"));
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
    fail(where, "model.num_encoder_layers must be >= 0");
  if (shared_embedding && num_encoder_layers == 0)
    fail(where,
         "model.shared_embedding shares the encoder's tables with the decoder's, but "
         "model.num_encoder_layers = 0 (a language model has one set already)");
  if (dropout < 0 || dropout >= 1)
    fail(where, cat("model.dropout = ", dropout, " not in [0, 1)"));
  auto one_of = [](const std::vector<std::string>& choices, const std::string& v) {
    return std::find(choices.begin(), choices.end(), v) != choices.end();
  };
  if (!one_of(norm_choices(), norm))
    fail(where, cat("model.norm = '", norm, "'; use layer_norm or rms_norm"));
  if (!one_of(activation_dtype_choices(), activation_dtype))
    fail(where, cat("model.activation_dtype = '", activation_dtype,
                    "'; use float32 or bfloat16 (bf16 contractions with fp32 sums)"));
  if (moe_every < 0)
    fail(where, "model.moe_every must be >= 0");
  if (attention_window < 0)
    fail(where,
         cat("model.attention_window = ", attention_window, " must be >= 0 (0: full attention)"));
  check_local_attention(where);
  if (loss_chunks < 1 || length % loss_chunks != 0)
    fail(where, cat("model.loss_chunks = ", loss_chunks, " must be >= 1 and divide model.length = ",
                    length, " (the loss head is chunked along dim 'length')"));
  if (moe_every > 0 && moe.num_experts < 1)
    fail(where, "model.moe.num_experts must be >= 1");
}

void TransformerConfig::check_local_attention(const char* where) const {
  if (local_attention_block < 0)
    fail(where, cat("model.local_attention_block = ", local_attention_block,
                    " must be >= 0 (0: the window)"));
  if (local_attention_block > 0 && attention_window == 0)
    fail(where, cat("model.local_attention_block = ", local_attention_block,
                    " needs local attention (model.attention_window > 0; it is 0)"));
  if (!local_attention())
    return;
  if (local_attention_block == 0 && length % attention_window != 0)
    fail(where, cat("model.length = ", length, " is not a multiple of model.attention_window = ",
                    attention_window, " (local attention runs in blocks of the window)"));
  if (local_attention_block == 0)
    return;
  if (local_attention_block < attention_window)
    fail(where, cat("model.local_attention_block = ", local_attention_block,
                    " is narrower than model.attention_window = ", attention_window,
                    " (a block holds at least the window)"));
  if (length % local_attention_block != 0)
    fail(where, cat("model.length = ", length,
                    " is not a multiple of model.local_attention_block = ", local_attention_block,
                    " (local attention runs in blocks of it; window ", attention_window, ")"));
}

Precision TransformerConfig::contraction_precision() const {
  return activation_dtype == "bfloat16" ? Precision::bfloat16 : Precision::float32;
}

bool TransformerConfig::is_moe_layer(std::int64_t layer) const {
  return moe_every > 0 && (layer + 1) % moe_every == 0;
}

std::int64_t TransformerConfig::analytic_parameter_count() const {
  const std::int64_t norm_params = norm == "layer_norm" ? 2 * d_model : d_model;
  const std::int64_t attention = 4 * d_model * num_heads * d_kv;
  auto ffn = [&](std::int64_t layer) {
    if (is_moe_layer(layer))
      return moe.num_experts * 2 * d_model * d_ff + d_model * moe.num_experts;
    return 2 * d_model * d_ff;
  };
  std::int64_t total = 0;
  for (std::int64_t l = 0; l < num_encoder_layers; ++l)
    total += attention + ffn(l) + 2 * norm_params;
  for (std::int64_t l = 0; l < num_layers; ++l)
    total += attention * (num_encoder_layers > 0 ? 2 : 1) + ffn(l) +
             (num_encoder_layers > 0 ? 3 : 2) * norm_params;
  total += norm_params * (num_encoder_layers > 0 ? 2 : 1);  // final norms
  const std::int64_t tables = num_encoder_layers > 0 && !shared_embedding ? 2 : 1;
  total += vocab_size * d_model * (tables + 1);  // embeddings + softmax
  total += length * d_model * tables;            // positions
  return total;
}

std::string TransformerConfig::to_string() const {
  std::ostringstream os;
  os << "vocab " << vocab_size << ", d_model " << d_model << ", d_ff " << d_ff << ", heads "
     << num_heads << " x d_kv " << d_kv << ", layers " << num_layers;
  if (num_encoder_layers)
    os << " (+" << num_encoder_layers << " encoder"
       << (shared_embedding ? ", shared embedding" : "") << ")";
  os << ", length " << length << ", batch " << batch;
  if (activation_dtype != "float32")
    os << ", " << activation_dtype;
  if (recompute != Recompute::norms)
    os << ", recompute " << nn::to_string(recompute);
  if (loss_chunks != 1)
    os << ", loss chunks " << loss_chunks;
  if (attention_window)
    os << ", attention window " << attention_window;
  if (local_attention_block)
    os << " in blocks of " << local_attention_block;
  if (moe_every)
    os << ", MoE every " << moe_every << " (" << moe.num_experts << " experts)";
  return os.str();
}

}  // namespace mtk::nn
