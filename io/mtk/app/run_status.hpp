#pragma once
// How a run ended, on disk: RUN_DIR/status.json, written by rank 0 when training starts and when it
// ends, so that scripts and users can trust it whatever the launcher returns.

#include <cstdint>
#include <string>

namespace mtk {

/// The states of RUN_DIR/status.json's "state".
enum class RunState {
  running,               ///< training started (a job killed -9 leaves this)
  completed,             ///< every step ran and the last one is saved (exit 0)
  stopped,               ///< a stop signal: saved at "step", resumable (exit 75)
  stopped_before_start,  ///< a stop signal before the first step: nothing new saved (exit 76)
  failed,                ///< an error ended the run ("message"; exit 1)
};

const char* to_string(RunState s);

/// Writes RUN_DIR/status.json atomically: one JSON object with "state", "step" (the step reached),
/// "steps" (the steps asked for), "exit_code", "message", "tool", "job", "pid", "time".
void write_run_status(const std::string& run_dir, RunState state, std::int64_t step,
                      std::int64_t steps, int exit_code, const std::string& tool,
                      const std::string& message = "");

}  // namespace mtk
