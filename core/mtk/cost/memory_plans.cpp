#include <mtk/base/error.hpp>
#include <mtk/cost/memory_plans.hpp>
#include <mtk/nn/training_graph.hpp>

#include <algorithm>
#include <tuple>
#include <utility>

namespace mtk::cost {

std::string MemorySettings::to_args() const {
  return cat("--set model.recompute=", nn::to_string(recompute),
             " --set model.loss_chunks=", loss_chunks, " --set train.microbatches=", microbatches);
}

std::vector<std::int64_t> loss_chunks_to_try(const nn::TransformerConfig& model) {
  // Beyond 8 the pool's one buffer per size outweighs the smaller slices (docs/memory.md).
  std::vector<std::int64_t> out;
  for (const std::int64_t c : {1, 2, 4, 8})
    if (model.length % c == 0)
      out.push_back(c);
  return out;
}

std::vector<MemorySettings> memory_settings_to_try(const nn::TransformerConfig& model,
                                                   const MemorySettings& configured) {
  std::vector<MemorySettings> out;
  for (const nn::Recompute r :
       {nn::Recompute::none, nn::Recompute::norms, nn::Recompute::attention, nn::Recompute::layer})
    for (std::int64_t k = 1; k <= model.batch; ++k)
      for (const std::int64_t c : loss_chunks_to_try(model))
        if (model.batch % k == 0 && !(MemorySettings{r, k, c} == configured))
          out.push_back({r, k, c});
  return out;
}

void build_training_graph(Graph& g, nn::TransformerConfig model, const MemorySettings& settings,
                          const OptimizerFactory& make_optimizer) {
  model.recompute = settings.recompute;
  model.loss_chunks = settings.loss_chunks;
  if (settings.microbatches < 1 || model.batch % settings.microbatches != 0)
    fail("mtk::cost::build_training_graph", cat("train.microbatches ", settings.microbatches,
                                                " must divide model.batch ", model.batch));
  if (settings.loss_chunks < 1 || model.length % settings.loss_chunks != 0)
    fail("mtk::cost::build_training_graph", cat("model.loss_chunks ", settings.loss_chunks,
                                                " must divide model.length ", model.length));
  const std::unique_ptr<optim::Optimizer> optimizer = make_optimizer();
  nn::build_training(g, model, static_cast<int>(settings.microbatches), *optimizer,
                     optim::LearningRateSchedule());
}

namespace {

// One setting's search; no candidates when every valid layout is over the limit or none is valid
// (a microbatch slice that no mesh dim divides).
MemoryPlan search_setting(const nn::TransformerConfig& model, const MemorySettings& settings,
                          const OptimizerFactory& make_optimizer, const Machine& machine,
                          const SearchOptions& options) {
  MemoryPlan plan{settings, {}};
  Graph g;
  build_training_graph(g, model, settings, make_optimizer);
  try {
    plan.result = search_layouts(g, machine, options);
  } catch (const Error&) {
    plan.result.ranked.clear();  // no valid layout with this setting
  }
  return plan;
}

}  // namespace

MemoryPlanSearch search_with_memory_settings(const nn::TransformerConfig& model,
                                             const MemorySettings& configured,
                                             const OptimizerFactory& make_optimizer,
                                             const Machine& machine, const SearchOptions& options) {
  MemoryPlanSearch out;
  SearchOptions quiet = options;
  quiet.over_memory_fails = false;
  out.configured.settings = configured;
  {
    Graph g;
    build_training_graph(g, model, configured, make_optimizer);
    out.configured.result = search_layouts(g, machine, quiet);  // throws when none is valid
  }
  if (!out.configured.result.ranked.empty() || options.memory_bytes <= 0)
    return out;
  std::int64_t smallest = out.configured.result.min_peak_bytes;
  MemorySettings smallest_at = configured;
  for (const MemorySettings& s : memory_settings_to_try(model, configured)) {
    MemoryPlan plan = search_setting(model, s, make_optimizer, machine, quiet);
    if (!plan.result.ranked.empty())
      out.plans.push_back(std::move(plan));
    else if (plan.result.min_peak_bytes > 0 && plan.result.min_peak_bytes < smallest)
      std::tie(smallest, smallest_at) = std::make_pair(plan.result.min_peak_bytes, s);
  }
  if (out.plans.empty())
    fail("mtk::cost::search_layouts",
         cat("every one of the ", out.configured.result.analyzed, " valid layouts on ",
             options.processors, " processors needs more than the memory limit of ",
             options.memory_bytes, " bytes per processor, with every model.recompute mode, ",
             "train.microbatches count dividing model.batch ", model.batch,
             " and model.loss_chunks count of 1, 2, 4, 8 dividing model.length ", model.length,
             " too; the smallest peak is ", smallest, " bytes (", smallest_at.to_args(),
             "); use more processors or more memory"));
  std::stable_sort(
      out.plans.begin(), out.plans.end(), [](const MemoryPlan& a, const MemoryPlan& b) {
        return std::make_tuple(a.result.ranked.front().time.total_s, a.settings.recompute,
                               a.settings.microbatches, a.settings.loss_chunks) <
               std::make_tuple(b.result.ranked.front().time.total_s, b.settings.recompute,
                               b.settings.microbatches, b.settings.loss_chunks);
      });
  return out;
}

}  // namespace mtk::cost
