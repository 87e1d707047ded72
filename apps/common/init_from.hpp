#pragma once
// `train --init-from CHECKPOINT [--init-exclude PATTERN]...`: a new run that starts at step 0 from
// another run's trained weights (docs/lm1b.md "Fine-tuning"). The optimizer's slots, the step, the
// learning-rate schedule and the data position start afresh from the config; the variables the
// patterns name keep their initializers' values.

#include <mtk/checkpoint/init_from.hpp>

#include "training.hpp"
#include <string>

namespace mtk::app {

/// Adds --init-from (refused with --restore: CLI11's usage error) and --init-exclude
/// (add_train_options() calls it).
void add_init_from_options(CLI::App& app, RunOptions& o);

/// The source of a fine-tune, checked before anything is loaded.
struct InitFromPlan {
  CheckpointMetadata meta;  ///< the source checkpoint's
  WeightsOrigin origin;     ///< what the new run records
  WeightSelection weights;  ///< the trained variables loaded and those left to their initializers
};

/// Resolves o.init_from (a checkpoint, checkpoints/ or run directory), reads its metadata and
/// manifest hash, splits `g`'s trained variables by o.init_exclude, and checks the vocabulary: a
/// checkpoint trained on another vocabulary than the data's is refused unless every variable
/// with a `vocab` dim is excluded (the message names them). Collective; every rank fails alike.
InitFromPlan plan_init_from(const RunOptions& o, Graph& g, const Mesh& mesh,
                            const std::string& tool);

/// Loads the planned weights into `program` (any mesh and layout: each rank reads its slice);
/// every variable whose shape differs from the checkpoint's is named in one error with both
/// shapes. Says what was loaded. Collective.
void load_init_weights(Program& program, const InitFromPlan& plan, const Mesh& mesh,
                       const std::string& tool);

/// A run directory that has checkpoints resumes from them when they descend from the same source
/// (a requeued fine-tune); `restored_origin` (their CheckpointMetadata::init_from) naming another
/// source, or none, is refused. Every rank reads the same metadata: fails alike.
void check_resumed_origin(const std::string& restored_origin, const std::string& restored,
                          const InitFromPlan& plan, const RunOptions& o, const std::string& tool);

}  // namespace mtk::app
