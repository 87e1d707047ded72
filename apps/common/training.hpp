#pragma once
// What the training applications (mtk-lm1b, mtk-wmt) share: the run options of their commands
// (--config/--mesh/--layout/--set/--run-dir/--restore), the train.* and checkpoint.* settings, the
// program's cost check, restoring a checkpoint, and the training loop with its metrics, progress
// line, checkpoints and stop signals. Each app supplies its data as a TrainingData.

#include <mtk/app/run_dir_lock.hpp>
#include <mtk/base/precision.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>

#include "cli.hpp"
#include "say.hpp"
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mtk::app {

using config::kMaxSteps;

/// The command line every command of a training app shares.
struct RunOptions {
  Config config = Config::from_string("{}");
  std::string config_path, mesh, layout, run_dir, restore;
  std::vector<std::string> sets;
  bool print_config = false, dry_run = false;
  bool fresh_start = false;  ///< train: start at step 1 in a run directory with history
  /// train --init-from: the checkpoint whose weights a new run starts from (init_from.hpp), and
  /// --init-exclude: the patterns of the variables it leaves to their initializers.
  std::string init_from;
  std::vector<std::string> init_exclude;
  /// --strict-layout: layout rules naming no tensor dim the model could have are errors
  /// (layout_check.hpp), not warnings; check_cost() checks them.
  bool strict_layout = false;
  /// The vocabulary of the prepared data (hex), recorded in checkpoints and compared with theirs.
  std::string vocab_fingerprint;
  /// The effective config as YAML (effective_config()): config.resolved.yaml and checkpoints
  /// record it; "" records `config` as given.
  std::string resolved_yaml;
};

/// A vocabulary fingerprint as checkpoints record it (16 hex digits).
std::string fingerprint_text(std::uint64_t fingerprint);

/// Adds --config (`configs`: where configs live), --mesh, --layout, --set, --run-dir and
/// --restore (`restore_help`).
void add_run_options(CLI::App& app, RunOptions& o, const std::string& configs,
                     const std::string& restore_help);
/// Adds --print-config, --dry-run (`dry_run_help`) and --strict-layout (the commands that call
/// check_cost()).
void add_check_options(CLI::App& app, RunOptions& o, const std::string& dry_run_help);
/// Checks every token of the shards `paths` against their checksums, the shards shared out over
/// the ranks of `comm`; all ranks fail alike, naming the damaged file (what --dry-run runs).
void verify_token_shards(const Communicator& comm, const std::vector<std::string>& paths);
/// Adds train's --fresh-start, --init-from and --init-exclude (after add_run_options(): --init-from
/// excludes --restore).
void add_train_options(CLI::App& app, RunOptions& o);

/// Loads the config file and applies --set (`--set mesh=X` and `--set layout=X` replace them
/// whole, as --mesh and --layout do), --mesh and --layout; the run directory defaults to
/// train.run_dir, else "run".
void load_config(RunOptions& o);

/// The train.* and checkpoint.* settings (<mtk/config/training_config.hpp>).
using TrainingSettings = config::TrainingSettings;

/// What --print-config prints and config.resolved.yaml records: `given` (file, --set, --mesh,
/// --layout) with the sections `sections` written in full by `write` (presets and defaults
/// expanded, every key with its value), after the other sections as given; `mesh` defaults to
/// batch:`ranks`.
Config effective_config(const Config& given, const std::vector<std::string>& sections,
                        const std::function<void(Config&)>& write, int ranks);

/// The Markdown reference blocks of the sections every training app shares: model, train,
/// checkpoint (config::markdown_block).
std::string shared_config_reference();
/// `TOOL config-schema`: prints `reference` (the Markdown tables of docs/configuration.md).
/// Returns the exit status.
int config_schema_main(const std::vector<std::string>& args, const std::string& tool,
                       const std::string& reference);

/// The `mesh` of `config` (default batch:ranks); one of another number of processors than `ranks`
/// fails naming both (`tool`).
MeshShape mesh_for_ranks(const Config& config, int ranks, const std::string& tool);

/// This rank's slice of a batch of `batch` rows: the size of the mesh dim that splits `batch`
/// (1 when none) and the coordinate on it. A batch it does not divide fails naming `what` (e.g.
/// "model.batch") and the dim.
struct BatchSlice {
  int slices = 1, index = 0;
};
BatchSlice batch_slice(const LayoutRules& rules, const Mesh& mesh, std::int64_t batch,
                       const std::string& what, const std::string& tool);

/// The `model` of `config` with model.vocab_size defaulting to `vocab_size`, the size of the
/// vocabulary `vocab_path`; another model.vocab_size fails naming both.
nn::TransformerConfig model_for_vocabulary(const Config& config, int vocab_size,
                                           const std::string& vocab_path, const std::string& tool);
/// The `model` --print-config shows, before any data is opened: model.vocab_size from the
/// vocabulary `vocab_path` when the config has none and that file reads (`vocab_known` says
/// whether the printed size is real).
nn::TransformerConfig model_for_printing(const Config& config, const std::string& vocab_path,
                                         bool& vocab_known);
/// Rank 0 prints `config` as YAML (--print-config); `vocab_known` false adds a note that
/// model.vocab_size is left out, the size of data.dir's vocabulary. The run-time options in force
/// (describe_runtime_options(): each MTK_* variable, its value and whether it was set) follow as
/// YAML comments, so the text still reads back as a config; `plan_comment` (comment lines,
/// plan_for_printing()) goes between the two.
void print_config(const Config& config, bool vocab_known, const std::string& plan_comment = "");

/// Prints the program's cost per rank (a lowering that allocates nothing) and refuses, on every
/// rank, a program whose peak memory exceeds this rank's share of its node's memory. First checks
/// the layout rules' tensor dims against `g`'s and the Transformer's (check_layout_rules): a
/// warning, or with --strict-layout (load_config() took it from RunOptions) an error on every
/// rank.
void check_cost(Graph& g, const MeshShape& mesh_shape, const LayoutRules& rules, const Mesh& mesh,
                const std::string& model_text);

/// Restores from --restore, or the newest good checkpoint of the run directory; returns the
/// directory restored ("" when none, which is an error when `required`, naming `tool`). `meta`
/// (may be null) receives the checkpoint's metadata.
std::string restore_weights(Program& program, const RunOptions& o, const Mesh& mesh,
                            CheckpointMetadata* meta, bool required, const std::string& tool);

/// Rank 0 creates the run directory and takes its lock for the whole job (one job per run
/// directory; a lock whose holder died is taken over, and said); a status.json left "running" by a
/// job that is gone is then recorded as killed. Every rank returns (only rank 0's holds the lock).
RunDirLock lock_run_dir(const Mesh& mesh, const std::string& run_dir, const std::string& tool);

/// The training data of an app: the next batch of this rank's feeds, and the position in the data
/// a checkpoint keeps.
struct TrainingData {
  struct Batch {
    std::map<int, HostTensor> feeds;  ///< this rank's slice
    std::int64_t global_tokens = 0;   ///< non-padding target tokens over all ranks
  };
  std::function<Batch()> next;
  std::function<std::string()> save;
  std::function<void(const std::string&)> restore;
  std::function<std::int64_t()> epoch;
};

/// The model a training app trains: its graph, optim::minimize()'s learning rate and global
/// gradient norm (logged with the losses), and the precision of its contractions (the matmul
/// ceiling its MFU is measured against).
struct TrainedModel {
  const nn::ModelGraph& graph;
  Tensor lr, gradient_norm;
  Precision precision = Precision::float32;
};

/// Trains: writes the run directory's config.resolved.yaml, restores (--restore or the newest
/// checkpoint, with the data position), runs steps until settings.steps with the progress line
/// and metrics.jsonl every log_every steps (losses, step time, MFU, gradient norm, peak memory:
/// docs/lm1b.md), saves every checkpoint_every steps and at the end, and honours stop signals
/// (saves, exit 75; before the first step 76). `tool` prefixes the messages ("mtk-lm1b train").
/// Returns the exit status.
int run_training(const std::string& tool, Program& program, const TrainedModel& model,
                 const Mesh& mesh, const RunOptions& o, const TrainingSettings& settings,
                 const LayoutRules& rules, TrainingData& data);

}  // namespace mtk::app
