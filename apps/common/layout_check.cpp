#include "layout_check.hpp"

#include <mtk/base/error.hpp>
#include <mtk/config/known_keys.hpp>
#include <mtk/nn/decoding_graphs.hpp>
#include <mtk/nn/training_graph.hpp>
#include <mtk/optim/optim.hpp>

#include "say.hpp"
#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>

namespace mtk::app {
namespace {

void add_dims(const Graph& g, std::set<std::string>& out) {
  for (int id = 0; id < g.num_tensors(); ++id)
    for (const auto& name : g.tensor_info(id).shape.names())
      out.insert(name);
}

}  // namespace

std::vector<std::string> graph_dim_names(const Graph& g) {
  std::set<std::string> names;
  add_dims(g, names);
  return {names.begin(), names.end()};
}

const std::vector<std::string>& transformer_dim_names() {
  static const std::vector<std::string> names = [] {
    // Small enough to build in milliseconds; every feature that brings dims of its own on.
    nn::TransformerConfig base;
    base.vocab_size = 16;
    base.d_model = 8;
    base.d_ff = 16;
    base.num_heads = 2;
    base.d_kv = 4;
    base.num_layers = 2;
    base.length = 8;
    base.batch = 4;
    nn::TransformerConfig moe = base, grouped = base, local = base, encoder = base, chunked = base;
    moe.moe_every = 1;
    moe.moe.num_experts = 2;
    grouped = moe;
    grouped.moe.group_size = 4;  // routing groups shorter than a sequence: the moe_group dim
    local.attention_window = 2;
    encoder.num_encoder_layers = 1;
    chunked.loss_chunks = 2;
    std::set<std::string> out;
    for (const auto& config : {base, moe, grouped, local, encoder, chunked}) {
      for (int microbatches : {1, 2}) {
        Graph g;
        optim::Adafactor optimizer;
        nn::build_training(g, config, microbatches, optimizer, optim::LearningRateSchedule());
        add_dims(g, out);
      }
    }
    for (const auto& config : {base, local, encoder}) {
      nn::DecodingShape shape;
      shape.batch = 2;
      shape.beam = 2;
      shape = shape.resolved(config);
      if (config.num_encoder_layers > 0) {  // its own graph, as mtk::decode builds it
        Graph encoder_graph;
        nn::build_decoding_encoder(encoder_graph, config, shape);
        add_dims(encoder_graph, out);
      }
      Graph g;
      nn::build_decoder_step(g, config, shape);
      add_dims(g, out);
    }
    return std::vector<std::string>(out.begin(), out.end());
  }();
  return names;
}

std::vector<std::string> unmatched_rule_dims(
    const LayoutRules& rules, const std::vector<std::string>& dims,
    const std::function<std::vector<std::string>()>& known) {
  const auto in = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  std::vector<std::string> out, others;
  bool asked = false;
  for (const auto& rule : rules.rules()) {
    if (in(dims, rule.first))
      continue;
    if (!asked && known) {
      others = known();
      asked = true;
    }
    if (!in(others, rule.first))
      out.push_back(rule.first);
  }
  return out;
}

void check_layout_rules(const Graph& g, const LayoutRules& rules,
                        const std::function<std::vector<std::string>()>& known, bool strict,
                        const std::string& tool) {
  // Usually every rule's dim is found within the first layer's tensors: stop there.
  std::vector<std::string> missing;
  for (const auto& rule : rules.rules())
    missing.push_back(rule.first);
  for (int id = 0; id < g.num_tensors() && !missing.empty(); ++id)
    for (const auto& d : g.tensor_info(id).shape.dims())
      missing.erase(std::remove(missing.begin(), missing.end(), d.name), missing.end());
  if (missing.empty())
    return;
  const std::vector<std::string> dims = graph_dim_names(g);
  const std::vector<std::string> unmatched = unmatched_rule_dims(rules, dims, known);
  static std::mutex mutex;
  static std::set<std::string> warned;  // each rule once per process
  for (const auto& dim : unmatched) {
    const std::string rule = dim + ":" + rules.mesh_dim_for(dim);
    const std::string near = config::nearest_name(dim, dims);
    const std::string what =
        cat("the layout rule '", rule, "' names the tensor dimension '", dim,
            "', which the model does not have under any settings, so it splits nothing",
            near.empty() ? std::string() : cat("; did you mean '", near, "'?"),
            " (the model's dims: ", config::joined(dims), ")");
    if (strict)
      fail("mtk::app::check_layout_rules", cat(what, " [--strict-layout]"));
    std::lock_guard<std::mutex> lock(mutex);
    if (warned.insert(rule).second && says()) {
      std::fprintf(stderr, "%s: warning: %s; --strict-layout makes this an error\n", tool.c_str(),
                   what.c_str());
      std::fflush(stderr);
    }
  }
}

void add_strict_layout_flag(CLI::App& app, bool& strict) {
  app.add_flag("--strict-layout", strict,
               "Layout rules that name no tensor dimension the model could have (a typo such as "
               "batchh:batch) are errors, not warnings");
}

}  // namespace mtk::app
