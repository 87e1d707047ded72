#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/nn/paper_configs.hpp>

#include <cstdint>
#include <limits>

namespace mtk {
namespace config {
namespace {

using nn::TransformerConfig;

// "paper_lm:N" or "paper_translation:N".
TransformerConfig paper_preset(const std::string& name) {
  const auto colon = name.find(':');
  const std::string kind = name.substr(0, colon);
  int size = 0;
  try {
    std::size_t used = 0;
    const std::string number = colon == std::string::npos ? "" : name.substr(colon + 1);
    size = std::stoi(number, &used);
    if (used != number.size())
      throw std::invalid_argument(number);
  } catch (const std::exception&) {
    fail("mtk::config::paper_preset", "no size after the colon");
  }
  if (kind == "paper_lm")
    return nn::paper_lm(size);
  if (kind == "paper_translation")
    return nn::paper_translation(size);
  fail("mtk::config::paper_preset", cat("no preset '", kind, "'"));
}

std::vector<std::pair<std::string, nn::SecondPolicy>> second_policies() {
  std::vector<std::pair<std::string, nn::SecondPolicy>> out;
  for (auto p : {nn::SecondPolicy::all, nn::SecondPolicy::none, nn::SecondPolicy::threshold,
                 nn::SecondPolicy::random})
    out.emplace_back(nn::to_string(p), p);
  return out;
}

Schema<nn::MoeOptions> moe_schema() {
  using M = nn::MoeOptions;
  Schema<M> s;
  s.integer("num_experts", &M::num_experts, 1, 1 << 20, "experts in each mixture-of-experts layer")
      .real("capacity_factor_train", &M::capacity_factor_train, 1e-3, 1e3,
            "expert capacity over the even share of tokens, in training")
      .real("capacity_factor_eval", &M::capacity_factor_eval, 1e-3, 1e3,
            "expert capacity over the even share of tokens, in evaluation and decoding")
      .real("loss_coefficient", &M::loss_coefficient, 0.0, 1e3,
            "weight of the load-balancing loss added to the training loss")
      .choice("second_policy_train", &M::second_policy_train, second_policies(),
              "when a token also goes to its second expert in training: all, none, threshold "
              "(gate > threshold), random (probability gate / threshold; Mesh-TF's default)")
      .choice("second_policy_eval", &M::second_policy_eval, second_policies(),
              "the same in evaluation and decoding")
      .real("second_threshold_train", &M::second_threshold_train, 1e-9, 1.0,
            "the threshold of second_policy_train (Mesh-TF: 0.2)")
      .real("second_threshold_eval", &M::second_threshold_eval, 1e-9, 1.0,
            "the threshold of second_policy_eval (Mesh-TF: 0.2)")
      .integer("group_size", &M::group_size, 0, std::int64_t{1} << 40,
               "tokens per routing group, at most (Mesh-TF: 1024); 0: each sequence is a group");
  return s;
}

Schema<TransformerConfig> make_model_schema() {
  using T = TransformerConfig;
  // Dims fit an int32 kernel index; ids are int32.
  constexpr std::int64_t kMaxDim = std::numeric_limits<std::int32_t>::max();
  Schema<T> s;
  s.preset("preset", "paper_lm:-1..5 or paper_translation:-1..4", paper_preset,
           "starts from one of the paper's models (docs/models.md); the other keys override it")
      .integer("vocab_size", &T::vocab_size, 2, kMaxDim,
               "vocabulary size (the apps default it to the prepared vocabulary's)")
      .integer("d_model", &T::d_model, 1, kMaxDim, "width of the residual stream")
      .integer("d_ff", &T::d_ff, 1, kMaxDim, "hidden width of the feed-forward layers")
      .integer("num_heads", &T::num_heads, 1, kMaxDim, "attention heads")
      .integer("d_kv", &T::d_kv, 1, kMaxDim, "width of each head's keys and values")
      .integer("num_layers", &T::num_layers, 1, 100000, "decoder layers")
      .integer("num_encoder_layers", &T::num_encoder_layers, 0, 100000,
               "encoder layers; > 0 makes an encoder-decoder (translation)")
      .integer("length", &T::length, 1, kMaxDim, "sequence length in tokens (packed)")
      .integer("batch", &T::batch, 1, kMaxDim, "sequences per step over all ranks")
      .real("dropout", &T::dropout, 0.0, 0.999, "dropout rate in training")
      .real("label_smoothing", &T::label_smoothing, 0.0, 0.999, "label smoothing of the targets")
      .real("z_loss", &T::z_loss, 0.0, 1e3, "weight of the squared log-normaliser in the loss")
      .boolean("gelu", &T::gelu, "GELU instead of ReLU in the feed-forward layers")
      .boolean("shared_embedding", &T::shared_embedding,
               "encoder and decoder share one embedding and one position table (T2T's "
               "shared_embedding; the paper_translation presets); needs an encoder")
      .choice("norm", &T::norm, T::norm_choices(), "the normalisation layer")
      .choice("activation_dtype", &T::activation_dtype, T::activation_dtype_choices(),
              "precision of the contractions (bfloat16: bf16 operands, fp32 sums)")
      .choice("recompute", &T::recompute, nn::recompute_names(),
              "activations the backward recomputes instead of keeping: none; norms (each norm's "
              "output); attention (each attention block, the feed-forward blocks' norms); "
              "layer (each layer); results are bitwise those of none (docs/memory.md)")
      .integer("loss_chunks", &T::loss_chunks, 1, kMaxDim,
               "> 1: training computes the logits and the cross-entropy in this many slices of "
               "`length` (it must divide it), all but the last recomputed in the backward, so one "
               "slice's logits and their gradient are alive at a time; the loss equals 1's within "
               "float32 reassociation (docs/memory.md)")
      .integer("attention_window", &T::attention_window, 0, kMaxDim,
               "> 0: the decoder's self-attention is local, position i attends to the window "
               "positions up to i (length a multiple of it; `length` may then be split over a "
               "mesh dim, docs/spatial.md); 0: full causal attention")
      .integer("local_attention_block", &T::local_attention_block, 0, kMaxDim,
               "local attention's block: 0 (the default) is the window; otherwise at least "
               "attention_window and dividing length; every block gives the same results "
               "(docs/spatial.md)")
      .integer("moe_every", &T::moe_every, 0, 100000,
               "every n-th feed-forward layer is a mixture of experts; 0: none")
      .nested("moe", &T::moe, moe_schema())
      .check([](const T& c) { c.validate(); });
  return s;
}

}  // namespace

const Schema<nn::TransformerConfig>& model_schema() {
  static const Schema<nn::TransformerConfig> schema = make_model_schema();
  return schema;
}

}  // namespace config

nn::TransformerConfig transformer_config_from(const Config& config, const std::string& section) {
  return config::model_schema().read(config, section);
}

void write_transformer_config(Config& config, const nn::TransformerConfig& model,
                              const std::string& section) {
  config::model_schema().write(config, section, model);
}

std::string transformer_config_yaml(const nn::TransformerConfig& model,
                                    const std::string& section) {
  Config c = Config::from_string("{}");
  write_transformer_config(c, model, section);
  return c.dump();
}

}  // namespace mtk
