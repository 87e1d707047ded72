#pragma once
// The training job of mtk-fmnist, on the frame of the other training apps (apps/common,
// io/mtk/app): one job per run directory (RUN_DIR/lock), RUN_DIR/status.json,
// config.resolved.yaml, metrics.jsonl, sharded HDF5 checkpoints every checkpoint.every steps and
// at the end, stop signals (saves, exit 75; before the first step 76), and a resume from the newest
// complete checkpoint (or --restore) that continues the losses bitwise: the data order depends only
// on the seed and the epoch, and the figures of the steps before come back from metrics.jsonl.

#include <mtk/parallel/mesh.hpp>

#include "fmnist_config.hpp"
#include "fmnist_model.hpp"
#include <string>

namespace mtk::fmnist {

/// What the job runs with besides the settings.
struct JobOptions {
  std::string run_dir;        ///< created when missing
  std::string restore;        ///< --restore: a checkpoint to start from instead of the run's newest
  std::string json_path;      ///< --json: a copy of RUN_DIR/result.json ("": none)
  std::string resolved_yaml;  ///< the effective config (config.resolved.yaml, checkpoints)
  std::string layout;         ///< the layout rules as text (checkpoints, result JSON)
};

/// Trains from the step restored (0 without a checkpoint) to the last, evaluating the test set
/// after every epoch (and after train.steps when that stops it inside one); writes the result JSON
/// at the end. Returns the exit status (0, 75 or 76). Collective over `mesh`.
int run_training(const Settings& settings, const Mesh& mesh, const Dataset& data, Trainer& trainer,
                 const JobOptions& options);

}  // namespace mtk::fmnist
