#pragma once
// `mesh: auto` and `layout: auto` (docs/memory.md#mesh-auto): at start-up a training app runs the
// layout search (mtk/cost/memory_plans.hpp) for the ranks it was given and the memory each has,
// and trains with the plan: mesh, layout, and, when nothing fits as configured, model.recompute,
// model.loss_chunks and train.microbatches. Rank 0 searches and broadcasts, so every rank runs the
// same plan; a plan that cannot be made fails on every rank with one message.

#include <mtk/config/config.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/nn/transformer_config.hpp>
#include <mtk/parallel/communicator.hpp>
#include <mtk/parallel/layout.hpp>
#include <mtk/parallel/mesh_shape.hpp>

#include <cstdint>
#include <string>

namespace mtk::app {

/// What a start-up plan chose and predicted.
struct AutoPlan {
  bool mesh_auto = false, layout_auto = false;  ///< what the config left to the plan
  MeshShape mesh;
  LayoutRules rules;
  nn::Recompute recompute = nn::Recompute::norms;
  std::int64_t microbatches = 1;
  std::int64_t loss_chunks = 1;
  double step_s = 0;              ///< predicted seconds per step
  std::int64_t peak_bytes = 0;    ///< predicted peak per rank
  std::int64_t memory_bytes = 0;  ///< the limit per rank planned for (0: none)
  std::string memory_source;      ///< where the limit came from
  std::string machine;            ///< the machine description's name and file
  std::int64_t candidates = 0;    ///< (mesh, layout) candidates that fit
  double seconds = 0;             ///< wall time of the planning
  std::int64_t lowered = 0;       ///< layouts lowered (analyze()) by the search, over the ranks
  std::int64_t bounded = 0;       ///< candidates left out by a lower bound of their memory

  bool planned() const { return mesh_auto || layout_auto; }
  /// The plan as printed at start-up (lines, each ending in '\n').
  std::string describe() const;
  /// The plan as YAML comment lines (config.resolved.yaml's header).
  std::string yaml_comment() const;
  /// Those lines without their header: "#   ranks: 2", "#   mesh: ...", one per field.
  std::string yaml_fields() const;
  /// What the config left to the plan: "mesh: auto, layout: auto", "mesh: auto" or "layout: auto".
  std::string auto_text() const;
};

/// Whether `key` ("mesh" or "layout") of `config` is the string `auto`.
bool is_auto(const Config& config, const std::string& key);

/// The memory limit per rank to plan for: train.memory_per_rank, else the machine file's
/// memory_bytes, else (host builds) the least over the ranks of their node's available memory
/// over the ranks on that node (host_memory_budget); 0 when none is known. Collective.
std::int64_t planning_memory(const config::TrainingSettings& train, std::int64_t machine_bytes,
                             const Communicator& comm, std::string& source);

/// When `config` has `mesh: auto` or `layout: auto`: plans for comm.size() ranks (the ranks share
/// the search out and every rank gets the same plan; progress every few seconds on rank 0; a stop
/// signal stops it within a lowering: mtk::StopRequested on every rank, exit 76), prints it on rank
/// 0, and writes it into `config` (mesh, layout, model.recompute, model.loss_chunks,
/// train.microbatches), `model` and `train`. Otherwise returns a plan with planned() false and
/// changes nothing. Failures (no valid layout, nothing fits the memory) are agreed on every rank,
/// naming `tool`, the model, the ranks, the memory and the smallest peak. `announce` false: prints
/// nothing. Collective.
AutoPlan plan_auto(Config& config, nn::TransformerConfig& model, config::TrainingSettings& train,
                   const std::string& run_dir, const Communicator& comm, const std::string& tool,
                   bool announce = true);

/// What --print-config adds to a config with `mesh: auto` or `layout: auto` (YAML comment lines;
/// "" for neither): the plan start-up would choose on comm.size() ranks; a note that it is chosen
/// at start-up when `vocab_known` is false (the plan needs the vocabulary's size); the planning's
/// error when nothing fits. `config` is left as it is. Collective.
std::string plan_for_printing(const Config& config, nn::TransformerConfig model,
                              config::TrainingSettings train, const std::string& run_dir,
                              bool vocab_known, const Communicator& comm, const std::string& tool);

}  // namespace mtk::app
