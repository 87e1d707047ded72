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
  Graph g(options.program);
  build_training_graph(g, model, settings, make_optimizer);
  try {
    plan.result = search_layouts(g, machine, options);
  } catch (const Error&) {
    plan.result.ranked.clear();  // no valid layout with this setting
  }
  return plan;
}

// The searcher of the i-th setting: dealt out back and forth (0, 1, ..., count-1, count-1, ...,
// 0, 0, ...). The settings cost more the more microbatches and loss chunks they have, in that
// order, so a plain round robin left one rank with the dearer of every pair (2-rank planning: 18.0
// against 14.5 s of searching).
int searcher_of(size_t i, int count) {
  const size_t n = static_cast<size_t>(count), round = i / n, at = i % n;
  return static_cast<int>(round % 2 == 0 ? at : n - 1 - at);
}

}  // namespace

MemoryPlanSearch search_memory_settings_share(const nn::TransformerConfig& model,
                                              const MemorySettings& configured,
                                              const OptimizerFactory& make_optimizer,
                                              const Machine& machine, const SearchOptions& options,
                                              int index, int count) {
  MemoryPlanSearch out;
  SearchOptions quiet = options;
  quiet.over_memory_fails = false;
  out.configured.settings = configured;
  {
    Graph g(options.program);
    build_training_graph(g, model, configured, make_optimizer);
    out.configured.result = search_layouts(g, machine, quiet);  // throws when none is valid
  }
  out.analyzed = out.configured.result.analyzed + 1;  // and its unsplit analysis
  out.bounded = out.configured.result.bounded;
  out.smallest_peak = out.configured.result.min_peak_bytes;
  out.smallest_at = configured;
  if (!out.configured.result.ranked.empty() || options.memory_bytes <= 0)
    return out;
  const std::vector<MemorySettings> settings = memory_settings_to_try(model, configured);
  // The other settings: candidates whose peak's lower bound is over the limit are not lowered
  // (they could not fit); when nothing fits, only peaks that could be the smallest are found.
  SearchOptions bounded = quiet;
  bounded.skip_by_memory_bound = true;
  SearchProgress done;
  done.settings = static_cast<std::int64_t>(settings.size());
  for (size_t i = 0; i < settings.size(); ++i) {
    if (count > 1 && searcher_of(i, count) != index)
      continue;
    const MemorySettings& s = settings[i];
    if (options.stop && options.stop())
      throw SearchStopped();
    done.analyzed = out.analyzed;
    done.bounded = out.bounded;
    bounded.exact_min_below = out.smallest_peak;
    bounded.progress_base = done;
    MemoryPlan plan = search_setting(model, s, make_optimizer, machine, bounded);
    out.analyzed += plan.result.analyzed + 1;
    out.bounded += plan.result.bounded;
    ++done.settings_done;
    if (!plan.result.ranked.empty()) {
      ++done.settings_fitting;
      out.plans.push_back(std::move(plan));
    } else if (plan.result.min_peak_bytes > 0 && plan.result.min_peak_bytes < out.smallest_peak) {
      std::tie(out.smallest_peak, out.smallest_at) = std::make_pair(plan.result.min_peak_bytes, s);
    }
    if (options.progress) {
      done.analyzed = out.analyzed;
      done.bounded = out.bounded;
      options.progress(done);
    }
  }
  sort_plans(out.plans);
  return out;
}

void fail_no_setting_fits(const nn::TransformerConfig& model, const SearchResult& configured,
                          const SearchOptions& options, std::int64_t smallest,
                          const MemorySettings& smallest_at) {
  fail("mtk::cost::search_layouts",
       cat("every one of the ", configured.analyzed + configured.bounded, " valid layouts on ",
           options.processors, " processors needs more than the memory limit of ",
           options.memory_bytes, " bytes per processor, with every model.recompute mode, ",
           "train.microbatches count dividing model.batch ", model.batch,
           " and model.loss_chunks count of 1, 2, 4, 8 dividing model.length ", model.length,
           " too; the smallest peak is ", smallest, " bytes (", smallest_at.to_args(),
           "); use more processors or more memory"));
}

void sort_plans(std::vector<MemoryPlan>& plans) {
  std::stable_sort(plans.begin(), plans.end(), [](const MemoryPlan& a, const MemoryPlan& b) {
    return std::make_tuple(a.result.ranked.front().time.total_s, a.settings.recompute,
                           a.settings.microbatches, a.settings.loss_chunks) <
           std::make_tuple(b.result.ranked.front().time.total_s, b.settings.recompute,
                           b.settings.microbatches, b.settings.loss_chunks);
  });
}

MemoryPlanSearch search_with_memory_settings(const nn::TransformerConfig& model,
                                             const MemorySettings& configured,
                                             const OptimizerFactory& make_optimizer,
                                             const Machine& machine, const SearchOptions& options) {
  MemoryPlanSearch out =
      search_memory_settings_share(model, configured, make_optimizer, machine, options, 0, 1);
  if (out.configured.result.ranked.empty() && options.memory_bytes > 0 && out.plans.empty())
    fail_no_setting_fits(model, out.configured.result, options, out.smallest_peak, out.smallest_at);
  return out;
}

}  // namespace mtk::cost
