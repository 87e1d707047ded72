#pragma once
// How a run ended, on disk: RUN_DIR/status.json, written by rank 0 when training starts and when it
// ends, so that scripts and users can trust it whatever the launcher returns. A job killed with
// SIGKILL (kill -9 of a rank, or of mpiexec, whose proxy then SIGKILLs the ranks) cannot record its
// end: it leaves "running", and the next command that looks at the run directory (train, eval,
// sample, translate) finds its job gone and records "killed" (settle_stale_run_status).

#include <cstdint>
#include <optional>
#include <string>

namespace mtk {

/// The states of RUN_DIR/status.json's "state".
enum class RunState {
  running,               ///< training started (a job killed -9 leaves this until the next look)
  completed,             ///< every step ran and the last one is saved (exit 0)
  stopped,               ///< a stop signal: saved at "step", resumable (exit 75)
  stopped_before_start,  ///< a stop signal before the first step: nothing new saved (exit 76)
  failed,                ///< an error ended the run ("message"; exit 1)
  killed,                ///< found "running" with its job gone: ended without recording how
};

const char* to_string(RunState s);

/// Writes RUN_DIR/status.json atomically: one JSON object with "state", "step" (the step reached),
/// "steps" (the steps asked for), "exit_code", "message", "tool", "job", "pid" and "host" (rank
/// 0's, which holds RUN_DIR/lock), "time".
void write_run_status(const std::string& run_dir, RunState state, std::int64_t step,
                      std::int64_t steps, int exit_code, const std::string& tool,
                      const std::string& message = "");

/// RUN_DIR/status.json as read back; empty when there is none or it cannot be parsed.
struct RunStatusRecord {
  std::string state, message, tool, job, host, time;
  std::int64_t step = 0, steps = 0, exit_code = 0, pid = 0;
};
std::optional<RunStatusRecord> read_run_status(const std::string& run_dir);

/// A status "running" whose job is gone is rewritten as "killed" (its step, steps, job, pid and
/// host kept; "message" says what happened; "time" when it was found) and a sentence saying so is
/// returned; "" when there is nothing to settle (no status, another state, or the job is alive or
/// cannot be checked from here). Gone: `lock_held` (the caller holds RUN_DIR/lock, so the writer
/// of "running" no longer does), or, on the host that wrote it, its pid does not exist or nobody
/// holds RUN_DIR/lock. A record from another host is left alone (its pid means nothing here).
std::string settle_stale_run_status(const std::string& run_dir, const std::string& tool,
                                    bool lock_held = false);

}  // namespace mtk
