#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/nn/paper_configs.hpp>

#include <algorithm>

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
                                          "moe_every",
                                          "moe.num_experts",
                                          "moe.capacity_factor_train",
                                          "moe.capacity_factor_eval",
                                          "moe.loss_coefficient"};
  reject_unknown_keys(config, section, known);
  nn::TransformerConfig c;
  auto key = [&](const char* k) { return section + "." + k; };
  if (config.has(key("preset"))) {
    const std::string p = config.get_string(key("preset"));
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
  c.vocab_size = config.get_int(key("vocab_size"), c.vocab_size);
  c.d_model = config.get_int(key("d_model"), c.d_model);
  c.d_ff = config.get_int(key("d_ff"), c.d_ff);
  c.num_heads = config.get_int(key("num_heads"), c.num_heads);
  c.d_kv = config.get_int(key("d_kv"), c.d_kv);
  c.num_layers = config.get_int(key("num_layers"), c.num_layers);
  c.num_encoder_layers = config.get_int(key("num_encoder_layers"), c.num_encoder_layers);
  c.length = config.get_int(key("length"), c.length);
  c.batch = config.get_int(key("batch"), c.batch);
  c.dropout = config.get_double(key("dropout"), c.dropout);
  c.label_smoothing = config.get_double(key("label_smoothing"), c.label_smoothing);
  c.z_loss = config.get_double(key("z_loss"), c.z_loss);
  c.gelu = config.get_bool(key("gelu"), c.gelu);
  c.norm = config.get_string(key("norm"), c.norm);
  c.moe_every = static_cast<int>(config.get_int(key("moe_every"), c.moe_every));
  c.moe.num_experts = static_cast<int>(config.get_int(key("moe.num_experts"), c.moe.num_experts));
  c.moe.capacity_factor_train =
      config.get_double(key("moe.capacity_factor_train"), c.moe.capacity_factor_train);
  c.moe.capacity_factor_eval =
      config.get_double(key("moe.capacity_factor_eval"), c.moe.capacity_factor_eval);
  c.moe.loss_coefficient = config.get_double(key("moe.loss_coefficient"), c.moe.loss_coefficient);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("mtk::transformer_config_from", cat(config.origin(), ": ", e.what()));
  }
  return c;
}

}  // namespace mtk
