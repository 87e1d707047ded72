#pragma once
// Which mesh and layout to run a model on: every mesh that factors the processor count (up to
// max_mesh_dims dims) with every mapping of the model's splittable dims onto its mesh dims,
// costed exactly by analyze() (no memory allocated), filtered by memory per processor and ranked
// by predicted step time (mtk/cost/step_time.hpp).
//
// Pruning, which loses no candidate: analyze()'s counters do not depend on the order or names of
// the mesh dims, so each set of (mesh dim size, tensor dims on it) is analysed once and then timed
// in every order of its mesh dims (the order decides which links a group uses). Mesh dims that
// split no tensor dim (pure replication) are not listed; neither are mappings that break
// divisibility or put two dims of one tensor on one mesh dim (checked before analyze()).

#include <mtk/cost/machine.hpp>
#include <mtk/cost/step_time.hpp>
#include <mtk/graph/graph.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh_shape.hpp>
#include <mtk/runtime/program.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace mtk::cost {

/// Thrown by the searches when SearchOptions::stop returns true (a stop signal): not an
/// mtk::Error, so no search mistakes it for a layout that cannot be lowered.
class SearchStopped : public std::runtime_error {
 public:
  SearchStopped() : std::runtime_error("the layout search was stopped") {}
};

/// How far a search has come (SearchOptions::progress).
struct SearchProgress {
  std::int64_t analyzed = 0;  ///< lowerings (analyze() calls) so far
  std::int64_t bounded = 0;   ///< candidates left out by their memory's lower bound, not lowered
  std::int64_t settings_done = 0, settings = 0;  ///< memory settings searched, of (memory_plans)
  std::int64_t settings_fitting = 0;             ///< of those, settings with a layout that fits
};

struct SearchOptions {
  int processors = 1;
  std::int64_t memory_bytes = 0;  ///< peak bytes per processor allowed (0: no limit)
  int max_mesh_dims = 3;
  /// Tensor dims the layout may split; empty: those the model's layers offer
  /// (Graph::offered_splits: batch, vocab, heads, d_ff, experts in a Transformer), else every dim;
  /// either way less the dims an op needs whole (OpDef::unsplittable).
  std::vector<std::string> dims;
  StepTimeOptions time;
  /// The program options of the graphs the memory-setting searches build (memory_plans.hpp;
  /// search_layouts() lowers with its graph's own, Graph::options()).
  ProgramOptions program;
  /// When every valid layout is over memory_bytes: throw (true), or return no candidates with
  /// over_memory and min_peak_bytes set (false; fail_over_memory() throws the same error later).
  bool over_memory_fails = true;
  /// Only this mesh (its dims' names, sizes and order; `processors` must be its size): the
  /// layouts of the splittable dims on it, a mesh dim may split nothing (`layout: auto` with a
  /// given mesh).
  std::optional<MeshShape> mesh;
  /// Only this layout: every mesh of `processors` over the mesh dims it names (sizes >= 1, in
  /// the order the rules first name them) on which it is valid (`mesh: auto` with a given layout).
  std::optional<LayoutRules> rules;
  /// With a memory limit: candidates whose peak's lower bound (memory_lower_bound) is over it are
  /// not lowered (counted in over_memory and bounded). The ranking is the same; min_peak_bytes is
  /// exact when nothing fits and the smallest peak is below exact_min_below, else it may be
  /// left at the smallest lower bound (min_peak_exact false).
  bool skip_by_memory_bound = false;
  std::int64_t exact_min_below = std::numeric_limits<std::int64_t>::max();
  /// Polled before every lowering: true stops the search (throws SearchStopped).
  std::function<bool()> stop;
  /// Called after every lowering and every candidate left out, with the counts so far.
  std::function<void(const SearchProgress&)> progress;
  /// Counts to start the progress reports from (search_with_memory_settings: earlier settings).
  SearchProgress progress_base;
};

struct Candidate {
  MeshShape mesh;
  LayoutRules rules;
  Counters counters;
  StepTime time;
  double mfu = 0;  ///< model matmul FLOPs / (processors x step time x matmul rate)
};

struct SearchResult {
  std::vector<Candidate> ranked;  ///< fastest first; ties by fewer mesh dims, then text
  std::vector<std::string> dims;  ///< the splittable dims considered
  double model_flops = 0;         ///< matmul FLOPs of one step on one processor (no split)
  std::int64_t meshes = 0;        ///< unordered mesh shapes (sizes >= 2) considered
  std::int64_t mappings = 0;      ///< (mesh, mapping) classes before the validity checks
  std::int64_t not_divisible = 0;
  std::int64_t tensor_conflicts = 0;  ///< two dims of one tensor on one mesh dim
  /// Offered dims left out because an op needs them whole: "dim (kind 'op')".
  std::vector<std::string> unsplittable;
  std::int64_t analyzed = 0;        ///< analyze() calls for candidates
  std::int64_t over_memory = 0;     ///< classes whose peak exceeds the limit
  std::int64_t bounded = 0;         ///< of those, left out by the lower bound (not lowered)
  std::int64_t min_peak_bytes = 0;  ///< smallest peak over all analysed classes
  /// Whether min_peak_bytes is the smallest peak of every valid class (false: classes left out by
  /// the bound may have smaller peaks, none below exact_min_below).
  bool min_peak_exact = true;
  /// The live peak of the whole step on one processor (mesh all:1, nothing split): over the
  /// processors, a lower bound of every candidate's peak.
  std::int64_t unsplit_live_peak_bytes = 0;
  std::int64_t unsplit_variable_bytes = 0;  ///< its variables (Counters::variable_bytes)
};

/// A lower bound of the peak per processor (Counters::peak_bytes) of `graph` lowered on `mesh`
/// under `rules`, without lowering it: its variables' slices (Counters::variable_bytes, exact,
/// held for the whole step) and the rest of the unsplit program's live peak
/// (`unsplit_live_peak` less `unsplit_variables`) over the processors (every buffer's slice is
/// at least its whole over the processors; the peak holds at least the live bytes). 0 for the
/// variables' part when the layout is not valid.
std::int64_t memory_lower_bound(const Graph& graph, const MeshShape& mesh, const LayoutRules& rules,
                                std::int64_t unsplit_live_peak, std::int64_t unsplit_variables);

/// Ordered factorizations of n into 1..max_dims factors, each >= 2 (n = 1: the single {1}).
std::vector<std::vector<std::int64_t>> mesh_factorizations(std::int64_t n, int max_dims);

/// Searches `graph` (the training graph: model, loss, gradients, optimizer update). Throws
/// mtk::Error naming the limit when nothing is left: no mesh dim size divides any splittable dim,
/// or every valid layout is over the memory limit (with the smallest peak found).
SearchResult search_layouts(Graph& graph, const Machine& machine, const SearchOptions& options);

/// The error search_layouts throws when every one of r's valid layouts is over the memory limit.
[[noreturn]] void fail_over_memory(const SearchResult& r, const SearchOptions& options);

}  // namespace mtk::cost
