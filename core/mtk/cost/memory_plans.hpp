#pragma once
// When no layout fits the memory limit: the layout search again with recomputation
// (model.recompute), the chunked loss head (model.loss_chunks) and microbatches
// (train.microbatches), the options that trade compute or throughput for activation memory
// (docs/memory.md). Each setting's training graph is built and searched like the configured one,
// so its extra cost is priced by the same counters and step-time model: recomputed forward steps
// (layers, and every loss chunk but the last) add their FLOPs, kernel steps and collectives;
// microbatches run the same FLOPs as more, smaller steps (smaller gemms, k times the per-step
// overheads).

#include <mtk/cost/layout_search.hpp>
#include <mtk/nn/transformer_config.hpp>
#include <mtk/optim/optimizer.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mtk::cost {

/// The training settings that trade compute or throughput for activation memory.
struct MemorySettings {
  nn::Recompute recompute = nn::Recompute::norms;
  std::int64_t microbatches = 1;
  std::int64_t loss_chunks = 1;
  /// The settings as command-line overrides: "--set model.recompute=layer --set
  /// model.loss_chunks=4 --set train.microbatches=4" (every one, so pasting them over a config
  /// that sets others gives exactly this setting).
  std::string to_args() const;
  bool operator==(const MemorySettings& o) const {
    return recompute == o.recompute && microbatches == o.microbatches &&
           loss_chunks == o.loss_chunks;
  }
};

/// One setting and its search (candidates that fit, fastest first).
struct MemoryPlan {
  MemorySettings settings;
  SearchResult result;
};

/// The configured setting's search, and when nothing fits, the plans of the other settings.
struct MemoryPlanSearch {
  MemoryPlan configured;
  /// Empty when the configured setting fits; else every other setting with a layout that fits,
  /// by their best candidate's predicted step time (ties: less recomputation, fewer microbatches,
  /// fewer loss chunks).
  std::vector<MemoryPlan> plans;
  /// When no setting fits: the smallest peak of any layout and its setting (the first setting
  /// with it in memory_settings_to_try's order, the configured one first).
  std::int64_t smallest_peak = 0;
  MemorySettings smallest_at;
  /// Over every setting searched: lowerings, and candidates left out by their memory's lower
  /// bound (SearchOptions::skip_by_memory_bound) instead.
  std::int64_t analyzed = 0, bounded = 0;
};

/// A fresh optimizer of the run's kind and hyperparameters (each graph gets its own).
using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>()>;

/// The loss-chunk counts the search tries: 1, 2, 4 and 8 where they divide model.length.
std::vector<std::int64_t> loss_chunks_to_try(const nn::TransformerConfig& model);

/// Every recompute mode with every microbatch count k dividing model.batch and every count of
/// loss_chunks_to_try, least change first (none before attention before layer, then k ascending,
/// then loss chunks ascending), `configured` left out.
std::vector<MemorySettings> memory_settings_to_try(const nn::TransformerConfig& model,
                                                   const MemorySettings& configured);

/// Builds `model`'s training graph with `settings` (nn::build_training) into `g`.
void build_training_graph(Graph& g, nn::TransformerConfig model, const MemorySettings& settings,
                          const OptimizerFactory& make_optimizer);

/// One share of search_with_memory_settings for `count` searchers (ranks) splitting the work: the
/// configured setting, and when nothing fits it, the other settings of memory_settings_to_try
/// dealt to `index` of `count` (back and forth: 0..count-1, then count-1..0, and so on). No error
/// when none of them fits (plans empty; smallest_peak and smallest_at of the share). The other
/// settings are searched with skip_by_memory_bound: a candidate whose peak cannot be under the
/// limit is not lowered. Throws SearchStopped when options.stop says so.
MemoryPlanSearch search_memory_settings_share(const nn::TransformerConfig& model,
                                              const MemorySettings& configured,
                                              const OptimizerFactory& make_optimizer,
                                              const Machine& machine, const SearchOptions& options,
                                              int index, int count);

/// The error when no setting fits: every layout of every setting over the limit, the smallest
/// peak `smallest` with `smallest_at`.
[[noreturn]] void fail_no_setting_fits(const nn::TransformerConfig& model,
                                       const SearchResult& configured, const SearchOptions& options,
                                       std::int64_t smallest, const MemorySettings& smallest_at);

/// Orders plans by their best candidate's predicted step time (ties: less recomputation, fewer
/// microbatches, fewer loss chunks).
void sort_plans(std::vector<MemoryPlan>& plans);

/// Searches the configured setting; when every valid layout is over options.memory_bytes, searches
/// the other settings. Throws mtk::Error when the configured setting has no valid layout (as
/// search_layouts does) or when no setting fits (naming the smallest peak and its setting).
MemoryPlanSearch search_with_memory_settings(const nn::TransformerConfig& model,
                                             const MemorySettings& configured,
                                             const OptimizerFactory& make_optimizer,
                                             const Machine& machine, const SearchOptions& options);

}  // namespace mtk::cost
