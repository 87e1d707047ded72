#include "model_file.hpp"

#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/parallel/mesh.hpp>

#include <nlohmann/json.hpp>

namespace mtk::ckpt_tool {
namespace {

using json = nlohmann::json;

nn::SecondPolicy policy_named(const std::string& name, const std::string& where) {
  for (auto p : {nn::SecondPolicy::all, nn::SecondPolicy::none, nn::SecondPolicy::threshold,
                 nn::SecondPolicy::random})
    if (name == nn::to_string(p))
      return p;
  fail(where,
       cat("moe.second_policy_eval '", name, "' is not one of all, none, threshold, random"));
}

json model_object(const nn::TransformerConfig& m) {
  json moe = json::object();
  if (m.moe_every > 0)
    moe = {{"num_experts", m.moe.num_experts},
           {"capacity_factor_eval", m.moe.capacity_factor_eval},
           {"second_policy_eval", nn::to_string(m.moe.second_policy_eval)},
           {"second_threshold_eval", m.moe.second_threshold_eval},
           {"group_size", m.moe.group_size}};
  return {{"vocab_size", m.vocab_size},
          {"d_model", m.d_model},
          {"d_ff", m.d_ff},
          {"num_heads", m.num_heads},
          {"d_kv", m.d_kv},
          {"num_layers", m.num_layers},
          {"num_encoder_layers", m.num_encoder_layers},
          {"shared_embedding", m.shared_embedding},
          {"length", m.length},
          {"gelu", m.gelu},
          {"norm", m.norm},
          {"norm_epsilon", 1e-6},
          {"attention_window", m.local_attention() ? m.attention_window : 0},
          {"moe_every", m.moe_every},
          {"moe", moe},
          {"activation_dtype", m.activation_dtype}};
}

}  // namespace

nn::TransformerConfig recorded_model(const CheckpointMetadata& meta, const std::string& dir,
                                     const std::string& where) {
  const bool has_model = !meta.config_yaml.empty() &&
                         Config::from_string(meta.config_yaml, dir + "/metadata.yaml").has("model");
  if (!has_model)
    fail(where, cat("checkpoint ", dir,
                    " records no `model` in its config: only checkpoints of mtk-lm1b and mtk-wmt "
                    "(Transformer models) can be exported"));
  return transformer_config_from(Config::from_string(meta.config_yaml, dir + "/metadata.yaml"));
}

void load_checkpoint_model(const Communicator& world, const std::string& path, std::int64_t batch,
                           CheckpointModel& out, const std::string& where) {
  agree_on_failure(world, [&] {
    out.dir = resolve_checkpoint_path(path);
    out.model = recorded_model(checkpoint_info(out.dir).metadata, out.dir, where);
    if (batch > 0)
      out.model.batch = batch;
    out.outputs = nn::build_transformer(out.graph, out.model, false);
  });
  // Nothing split: each rank holds every variable whole (an export's or a comparison's needs).
  const Mesh mesh(MeshShape::parse("ranks:" + std::to_string(world.size())), world);
  out.program = lower(out.graph, mesh, LayoutRules());
  restore_checkpoint(*out.program, out.dir, &out.meta);
}

std::map<std::string, Shape> model_variables(const nn::TransformerConfig& model) {
  Graph g;
  nn::build_transformer(g, model, false);
  std::map<std::string, Shape> vars;
  for (int i : g.variable_ops()) {
    const auto& op = g.op(i);
    vars.emplace(op.name, g.tensor_info(op.outputs[0]).shape);
  }
  return vars;
}

std::string model_json(const nn::TransformerConfig& model) {
  return model_object(model).dump();
}

void read_model_json(const std::string& text, nn::TransformerConfig& m, const std::string& what,
                     const std::string& where) {
  try {
    const json j = json::parse(text);
    m.vocab_size = j.at("vocab_size").get<std::int64_t>();
    m.d_model = j.at("d_model").get<std::int64_t>();
    m.d_ff = j.at("d_ff").get<std::int64_t>();
    m.num_heads = j.at("num_heads").get<std::int64_t>();
    m.d_kv = j.at("d_kv").get<std::int64_t>();
    m.num_layers = j.at("num_layers").get<std::int64_t>();
    m.num_encoder_layers = j.at("num_encoder_layers").get<std::int64_t>();
    m.shared_embedding = j.at("shared_embedding").get<bool>();
    m.length = j.at("length").get<std::int64_t>();
    m.gelu = j.at("gelu").get<bool>();
    m.norm = j.at("norm").get<std::string>();
    m.attention_window = j.at("attention_window").get<std::int64_t>();
    m.moe_every = j.at("moe_every").get<int>();
    m.activation_dtype = j.at("activation_dtype").get<std::string>();
    if (m.moe_every > 0) {
      const json& moe = j.at("moe");
      m.moe.num_experts = moe.at("num_experts").get<int>();
      m.moe.capacity_factor_eval = moe.at("capacity_factor_eval").get<double>();
      m.moe.second_policy_eval =
          policy_named(moe.at("second_policy_eval").get<std::string>(), where);
      m.moe.second_threshold_eval = moe.at("second_threshold_eval").get<double>();
      m.moe.group_size = moe.at("group_size").get<std::int64_t>();
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(where, cat(what, ": mtk_model is not the model's JSON (", e.what(), ")"));
  }
}

std::map<std::string, std::string> export_metadata(const nn::TransformerConfig& model,
                                                   const std::string& vocab_fingerprint,
                                                   const std::map<std::string, Shape>& variables) {
  json dims = json::object();
  for (const auto& [name, shape] : variables) {
    json names = json::array();
    for (const auto& d : shape.dims())
      names.push_back(d.name);
    dims[name] = names;
  }
  std::map<std::string, std::string> meta = {{"format", "pt"},
                                             {"mtk_format", kMtkFormat},
                                             {"mtk_model", model_json(model)},
                                             {"mtk_dims", dims.dump()}};
  if (!vocab_fingerprint.empty())
    meta["mtk_vocab_fingerprint"] = vocab_fingerprint;
  return meta;
}

std::vector<std::string> model_differences(const nn::TransformerConfig& file,
                                           const nn::TransformerConfig& config) {
  const json a = model_object(file), b = model_object(config);
  std::vector<std::string> lines;
  for (auto it = a.begin(); it != a.end(); ++it)
    if (!b.contains(it.key()) || b.at(it.key()) != *it)
      lines.push_back(cat("model.", it.key(), ": ", it->dump(), " (file), ",
                          b.contains(it.key()) ? b.at(it.key()).dump() : "-", " (config)"));
  return lines;
}

std::vector<float> block_of(const std::vector<float>& global,
                            const std::vector<std::int64_t>& sizes,
                            const std::vector<std::int64_t>& origin,
                            const std::vector<std::int64_t>& local) {
  std::int64_t n = 1;
  for (std::int64_t s : local)
    n *= s;
  std::vector<float> out(static_cast<std::size_t>(n));
  const std::size_t rank = sizes.size();
  std::vector<std::int64_t> index(rank, 0);  // position within the block, row-major
  for (std::int64_t k = 0; k < n; ++k) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < rank; ++d)
      flat = flat * sizes[d] + origin[d] + index[d];
    out[static_cast<std::size_t>(k)] = global[static_cast<std::size_t>(flat)];
    for (std::size_t d = rank; d-- > 0;) {
      if (++index[d] < local[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

std::vector<std::int64_t> sizes_of(const Shape& shape) {
  std::vector<std::int64_t> sizes;
  for (const auto& d : shape.dims())
    sizes.push_back(d.size);
  return sizes;
}

}  // namespace mtk::ckpt_tool
