#include <mtk/app/run_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>

#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

namespace mtk {
namespace {

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0)
    return "unknown-host";
  return host;
}

void write_record(const std::string& run_dir, const std::string& state, std::int64_t step,
                  std::int64_t steps, std::int64_t exit_code, const std::string& message,
                  const std::string& tool, const std::string& job, std::int64_t pid,
                  const std::string& host) {
  const MetricRecord record = {
      {"state", state},     {"step", step},           {"steps", steps}, {"exit_code", exit_code},
      {"message", message}, {"tool", tool},           {"job", job},     {"pid", pid},
      {"host", host},       {"time", utc_timestamp()}};
  write_file_atomically(run_dir + "/status.json", to_json(record) + "\n", "mtk::write_run_status");
}

// Whether some process holds RUN_DIR/lock (flock): a probe that takes and drops it at once.
bool lock_is_held(const std::string& run_dir) {
  const int fd = ::open((run_dir + "/lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;  // no lock file: nobody holds it
  int rc;
  do
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  const bool held = rc != 0 && errno == EWOULDBLOCK;
  if (rc == 0)
    ::flock(fd, LOCK_UN);
  ::close(fd);
  return held;
}

}  // namespace

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
    case RunState::killed:
      return "killed";
  }
  return "unknown";
}

void write_run_status(const std::string& run_dir, RunState state, std::int64_t step,
                      std::int64_t steps, int exit_code, const std::string& tool,
                      const std::string& message) {
  write_record(run_dir, to_string(state), step, steps, exit_code, message, tool, batch_job_id(),
               static_cast<std::int64_t>(::getpid()), host_name());
}

std::optional<RunStatusRecord> read_run_status(const std::string& run_dir) {
  std::ifstream in(run_dir + "/status.json");
  if (!in)
    return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return std::nullopt;
  RunStatusRecord r;
  const auto str = [&](const char* key, std::string& out) {
    if (j.contains(key) && j[key].is_string())
      out = j[key].get<std::string>();
  };
  const auto num = [&](const char* key, std::int64_t& out) {
    if (j.contains(key) && j[key].is_number_integer())
      out = j[key].get<std::int64_t>();
  };
  str("state", r.state);
  str("message", r.message);
  str("tool", r.tool);
  str("job", r.job);
  str("host", r.host);
  str("time", r.time);
  num("step", r.step);
  num("steps", r.steps);
  num("exit_code", r.exit_code);
  num("pid", r.pid);
  return r;
}

std::string settle_stale_run_status(const std::string& run_dir, const std::string& tool,
                                    bool lock_held) {
  const auto r = read_run_status(run_dir);
  if (!r || r->state != to_string(RunState::running))
    return "";
  const bool here = !r->host.empty() && r->host == host_name();
  bool gone = lock_held;
  if (!gone && here) {
    // The pid first (no probe of the lock when the process is plainly gone); a pid that exists
    // may be another process's by now, so then the lock decides.
    gone = (r->pid > 0 && ::kill(static_cast<pid_t>(r->pid), 0) != 0 && errno == ESRCH) ||
           !lock_is_held(run_dir);
  }
  if (!gone)
    return "";
  const std::string who = cat("host ", r->host.empty() ? "unknown" : r->host, ", pid ", r->pid,
                              r->job.empty() ? "" : cat(", job ", r->job),
                              r->time.empty() ? "" : cat(", status written ", r->time));
  const std::string message =
      cat("the job (", who, ") ended while training without recording how: killed with SIGKILL ",
          "(kill -9 of a rank or of mpiexec, whose proxy SIGKILLs the ranks) or its node failed; "
          "nothing was saved after its last checkpoint; found by ",
          tool);
  write_record(run_dir, to_string(RunState::killed), r->step, r->steps, 137, message, r->tool,
               r->job, r->pid, r->host);
  return cat("run directory '", run_dir, "': status.json said running, but ", message,
             ". Recorded as killed; train resumes from the newest checkpoint");
}

}  // namespace mtk
