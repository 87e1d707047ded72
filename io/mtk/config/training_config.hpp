#pragma once
// The `train`, `checkpoint` and `program` sections the training applications share (mtk-lm1b,
// mtk-wmt), from one field table each (docs/configuration.md#train, #checkpoint, #program).

#include <mtk/config/config.hpp>
#include <mtk/config/optimizer_config.hpp>
#include <mtk/config/program_config.hpp>
#include <mtk/config/schema.hpp>
#include <mtk/optim/schedule.hpp>

#include <cstdint>
#include <string>

namespace mtk::config {

/// A bound no real run reaches (10^12 steps).
constexpr std::int64_t kMaxSteps = 1000000000000;

/// The train.*, checkpoint.* and program.* settings.
struct TrainingSettings {
  std::int64_t steps = 1000, log_every = 10;
  std::uint64_t seed = 1;
  std::string run_dir = "run";
  /// train.microbatches: the batch runs as this many slices in series (nn::build_training).
  std::int64_t microbatches = 1;
  optim::LearningRateSchedule lr;  ///< train.learning_rate; total_steps defaults to steps
  OptimizerSettings optimizer;     ///< train.optimizer, train.adafactor, train.adam
  std::int64_t checkpoint_every = 1000;
  int checkpoint_keep = 3;
  /// checkpoint.fletcher32: chunked datasets carry HDF5's Fletcher32 checksum (CheckpointOptions).
  bool checkpoint_fletcher32 = false;
  /// program.*: how the program is lowered and run (ProgramOptions).
  ProgramOptions program;
  /// train.memory_per_rank: the memory `mesh: auto` plans for ("" : from the machine).
  std::string memory_per_rank;
  /// train.machine: the machine file `mesh: auto` plans with ("" : RUN_DIR/machine.yaml when
  /// present, else cost::reference_machine()).
  std::string machine;
};

/// Bytes from "16GiB", "8e9", "512M" (K, M, G, T: powers of 1000; KiB, MiB, GiB, TiB: of 1024);
/// other text, a value <= 0, less than one byte ("0.5"), not finite or beyond 2^62 fails as
/// `where`, naming `what` ("--memory", a config key) and the text. A fraction of a byte rounds
/// down.
std::int64_t parse_byte_size(const std::string& text, const std::string& where,
                             const std::string& what);

/// The `train` section.
const Schema<TrainingSettings>& train_schema();
/// The `checkpoint` section.
const Schema<TrainingSettings>& checkpoint_schema();

/// Reads `train`, `checkpoint` and `program`; unknown keys, values out of range, and
/// hyperparameters of an optimizer other than train.optimizer (train.adam.* with adafactor) are
/// errors naming the file.
TrainingSettings read_training_settings(const Config& config);
/// Writes every key of the three sections, so that read_training_settings gives `s` back.
void write_training_settings(Config& config, const TrainingSettings& s);

}  // namespace mtk::config
