#pragma once
// Layout rules that name no tensor dimension: a rule `batchh:batch` or `d_fff:model` splits
// nothing and, as in Mesh-TensorFlow, is silently inactive. A rule for a dim the model does not
// have is legitimate when the model has it under other settings (the paper's shared rules name
// `experts` in a dense model too); one that names no dim the model could ever have is almost
// always a typo: a warning (rank 0, once), an error with --strict-layout.
//
//   app::check_layout_rules(g, rules, app::transformer_dim_names, strict, "mtk-layout");

#include <mtk/graph/graph.hpp>
#include <mtk/parallel/layout.hpp>

#include "cli.hpp"
#include <functional>
#include <string>
#include <vector>

namespace mtk::app {

/// The dim names of every tensor of `g`, sorted, each once.
std::vector<std::string> graph_dim_names(const Graph& g);

/// The tensor dim names the Transformer's graphs have under any settings: the union of the dims
/// of small graphs built once with each feature on (dense, mixture of experts with and without
/// routing groups, local attention, an encoder, a chunked loss head, microbatches, the optimizer's
/// slots, the step-wise decoding graphs). Built on the first call only (milliseconds).
const std::vector<std::string>& transformer_dim_names();

/// The tensor dims of `rules` (by dim name, in rule order) in neither `dims` nor `known()`;
/// `known` is called only when some rule's dim is not in `dims`.
std::vector<std::string> unmatched_rule_dims(
    const LayoutRules& rules, const std::vector<std::string>& dims,
    const std::function<std::vector<std::string>()>& known);

/// Checks every rule of `rules` against the dims of `g` and `known()` (unmatched_rule_dims).
/// A rule naming neither: `strict` throws mtk::Error naming the rule, the nearest dim of `g` and
/// `g`'s dims; else rank 0 prints the same to stderr as a warning of `tool` ("mtk-layout"), once
/// per process for each rule.
void check_layout_rules(const Graph& g, const LayoutRules& rules,
                        const std::function<std::vector<std::string>()>& known, bool strict,
                        const std::string& tool);

/// Adds --strict-layout (layout rules naming no tensor dimension are errors) bound to `strict`.
void add_strict_layout_flag(CLI::App& app, bool& strict);

}  // namespace mtk::app
