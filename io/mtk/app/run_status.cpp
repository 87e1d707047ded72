#include <mtk/app/run_status.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>

#include <unistd.h>

namespace mtk {

const char* to_string(RunState s) {
  switch (s) {
    case RunState::running:
      return "running";
    case RunState::completed:
      return "completed";
    case RunState::stopped:
      return "stopped";
    case RunState::stopped_before_start:
      return "stopped_before_start";
    case RunState::failed:
      return "failed";
  }
  return "unknown";
}

void write_run_status(const std::string& run_dir, RunState state, std::int64_t step,
                      std::int64_t steps, int exit_code, const std::string& tool,
                      const std::string& message) {
  const MetricRecord record = {{"state", std::string(to_string(state))},
                               {"step", step},
                               {"steps", steps},
                               {"exit_code", std::int64_t{exit_code}},
                               {"message", message},
                               {"tool", tool},
                               {"job", batch_job_id()},
                               {"pid", static_cast<std::int64_t>(::getpid())},
                               {"time", utc_timestamp()}};
  write_file_atomically(run_dir + "/status.json", to_json(record) + "\n", "mtk::write_run_status");
}

}  // namespace mtk
