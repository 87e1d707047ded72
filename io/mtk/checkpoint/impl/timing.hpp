#pragma once
// MTK_CKPT_TIMING=1: rank 0 prints where a save or restore spent its time, and how it wrote
// (stderr).

#include <string>

namespace mtk::ckpt {

/// Seconds on a monotonic clock.
double wall_seconds();
/// Adds `seconds` to `phase` of the current save or restore.
void add_time(const std::string& phase, double seconds);
/// Records `value` under `key` for the current save or restore (the last value of a key wins).
void add_note(const std::string& key, const std::string& value);
/// Prints the phases and notes on `root` when MTK_CKPT_TIMING is set, and starts afresh.
void report_times(const std::string& what, bool root);

}  // namespace mtk::ckpt
