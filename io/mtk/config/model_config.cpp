#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/nn/paper_configs.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mtk {

void reject_unknown_keys(const Config& config, const std::string& section,
                         const std::vector<std::string>& known) {
  std::vector<std::string> stack = {""};
  while (!stack.empty()) {
    const std::string prefix = stack.back();
    stack.pop_back();
    const std::string at = prefix.empty() ? section : section + "." + prefix;
    for (const auto& k : config.keys(at)) {
      const std::string key = prefix.empty() ? k : prefix + "." + k;
      if (std::find(known.begin(), known.end(), key) != known.end())
        continue;
      bool is_parent = false;
      for (const auto& kn : known)
        is_parent = is_parent || kn.rfind(key + ".", 0) == 0;
      if (is_parent) {
        stack.push_back(key);
        continue;
      }
      std::string list;
      for (const auto& kn : known)
        list += (list.empty() ? "" : ", ") + kn;
      fail("mtk::Config",
           cat(config.origin(), ": unknown key '", section, ".", key, "' (known: ", list, ")"));
    }
  }
}

nn::TransformerConfig transformer_config_from(const Config& config, const std::string& section) {
  const std::vector<std::string> known = {"preset",
                                          "vocab_size",
                                          "d_model",
                                          "d_ff",
                                          "num_heads",
                                          "d_kv",
                                          "num_layers",
                                          "num_encoder_layers",
                                          "length",
                                          "batch",
                                          "dropout",
                                          "label_smoothing",
                                          "z_loss",
                                          "gelu",
                                          "norm",
                                          "activation_dtype",
                                          "moe_every",
                                          "moe.num_experts",
                                          "moe.capacity_factor_train",
                                          "moe.capacity_factor_eval",
                                          "moe.loss_coefficient"};
  config.require_section(section);
  config.require_section(section + ".moe");
  reject_unknown_keys(config, section, known);
  nn::TransformerConfig c;
  auto key = [&](const char* k) { return section + "." + k; };
  if (config.has(key("preset"))) {
    const std::string p = config.get_string(key("preset"), "", {});
    const auto colon = p.find(':');
    const std::string kind = p.substr(0, colon);
    int size = 0;
    try {
      size = colon == std::string::npos ? 0 : std::stoi(p.substr(colon + 1));
    } catch (const std::exception&) {
      fail("mtk::transformer_config_from",
           cat(config.origin(), ": ", key("preset"), " = '", p, "' has no size"));
    }
    if (kind == "paper_lm")
      c = nn::paper_lm(size);
    else if (kind == "paper_translation")
      c = nn::paper_translation(size);
    else
      fail("mtk::transformer_config_from", cat(config.origin(), ": ", key("preset"), " = '", p,
                                               "'; use paper_lm:-1..5 or paper_translation:-1..4"));
  }
  // Every key is type- and range-checked where it is read: ids are int32, dims fit an int32
  // kernel index, fractions lie in [0, 1].
  constexpr std::int64_t kMaxDim = std::numeric_limits<std::int32_t>::max();
  auto dim = [&](const char* k, std::int64_t& v, std::int64_t lo) {
    v = config.get_int(key(k), v, lo, kMaxDim);
  };
  dim("vocab_size", c.vocab_size, 2);
  dim("d_model", c.d_model, 1);
  dim("d_ff", c.d_ff, 1);
  dim("num_heads", c.num_heads, 1);
  dim("d_kv", c.d_kv, 1);
  c.num_layers = config.get_int(key("num_layers"), c.num_layers, 1, 100000);
  c.num_encoder_layers = config.get_int(key("num_encoder_layers"), c.num_encoder_layers, 0, 100000);
  dim("length", c.length, 1);
  dim("batch", c.batch, 1);
  c.dropout = config.get_double(key("dropout"), c.dropout, 0.0, 0.999);
  c.label_smoothing = config.get_double(key("label_smoothing"), c.label_smoothing, 0.0, 0.999);
  c.z_loss = config.get_double(key("z_loss"), c.z_loss, 0.0, 1e3);
  c.gelu = config.get_bool_checked(key("gelu"), c.gelu);
  c.norm = config.get_string(key("norm"), c.norm, {"layer_norm", "rms_norm"});
  c.activation_dtype =
      config.get_string(key("activation_dtype"), c.activation_dtype, {"float32", "bfloat16"});
  c.moe_every = static_cast<int>(config.get_int(key("moe_every"), c.moe_every, 0, 100000));
  c.moe.num_experts =
      static_cast<int>(config.get_int(key("moe.num_experts"), c.moe.num_experts, 1, 1 << 20));
  c.moe.capacity_factor_train =
      config.get_double(key("moe.capacity_factor_train"), c.moe.capacity_factor_train, 1e-3, 1e3);
  c.moe.capacity_factor_eval =
      config.get_double(key("moe.capacity_factor_eval"), c.moe.capacity_factor_eval, 1e-3, 1e3);
  c.moe.loss_coefficient =
      config.get_double(key("moe.loss_coefficient"), c.moe.loss_coefficient, 0.0, 1e3);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("mtk::transformer_config_from", cat(config.origin(), ": ", e.what()));
  }
  return c;
}

}  // namespace mtk
