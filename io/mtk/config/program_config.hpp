#pragma once
// The `program` section: the settings that shape a lowered program, its memory and predicted time
// (mtk::ProgramOptions, <mtk/base/program_options.hpp>), from one field table
// (docs/configuration.md#program). Every application that lowers a program reads it the same way.

#include <mtk/base/program_options.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/schema.hpp>

#include <string>
#include <vector>

namespace mtk::config {

/// The `program` section's field table.
const Schema<ProgramOptions>& program_schema();

/// One key of `program` (or checkpoint.fletcher32) whose value differs between two runs.
struct SettingChange {
  std::string key;       ///< "program.node_allreduce"
  std::string was, now;  ///< the values as YAML text
  /// How the change can change the results; "" when it changes only time and memory.
  std::string numerics;
};
/// The program.* keys of `recorded` (a checkpoint's or run's resolved config) that differ from
/// `current`, with whether each can change numerics. Keys absent from `recorded` (a checkpoint
/// from before the section existed) read as their defaults.
std::vector<SettingChange> program_changes(const Config& recorded, const ProgramOptions& current);

}  // namespace mtk::config
