#pragma once
// Training metrics: a JSON Lines log (one object per logged step) and the progress line rank 0
// prints.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mtk {

/// A metric value: an integer, a number or a string.
using MetricValue = std::variant<std::int64_t, double, std::string>;
/// Fields of one record, written in this order.
using MetricRecord = std::vector<std::pair<std::string, MetricValue>>;

/// One JSON object on one line (no newline), written by nlohmann-json in the record's order as
/// {"key": value, "key": value}. Integers are exact, doubles use the shortest text that reads back
/// to the same value (a whole number keeps its ".0"), strings are escaped (invalid UTF-8 replaced
/// by U+FFFD); NaN and infinities (not JSON) become null.
std::string to_json(const MetricRecord& record);

/// A float as the double a reader expects: the double of the float's shortest round-trip text,
/// so 0.1f is logged as 0.1, not 0.10000000149011612.
double metric_from_float(float value);

/// Appends records to a JSON Lines file, one object per line, flushed after each so that a killed
/// run keeps every logged step. Opening appends, so a resumed run continues the same file.
class MetricsWriter {
 public:
  MetricsWriter() = default;
  /// `truncate`: start the file afresh instead of appending.
  explicit MetricsWriter(const std::string& path, bool truncate = false);
  ~MetricsWriter();
  MetricsWriter(MetricsWriter&& other) noexcept;
  MetricsWriter& operator=(MetricsWriter&& other) noexcept;
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(const MetricRecord& record);
  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
};

/// Model FLOPs utilisation: `model_flops` of one step / (`processors` x `step_time_s` x
/// `ceiling_flops_per_s`, the matmul FLOP/s one processor reaches). NaN (logged as null) when a
/// figure is unknown (not positive).
double model_flops_utilization(double model_flops, int processors, double step_time_s,
                               double ceiling_flops_per_s);

/// The integer value of the top-level key `key` of one JSON object (a line of metrics.jsonl), or
/// nullopt when the line has no such key with an integer value (or is not a complete object).
std::optional<std::int64_t> json_int_field(const std::string& line, const std::string& key);

/// A wall-clock time as ISO-8601 UTC to the second, "2025-03-01T12:34:56Z" (a record's "time").
std::string utc_timestamp(
    std::chrono::system_clock::time_point t = std::chrono::system_clock::now());

/// The batch job this process runs in, for a record's "job": Slurm's SLURM_JOB_ID, else PBS's
/// PBS_JOBID, else "local".
std::string batch_job_id();

/// What resume_metrics_log() did.
struct MetricsLogResume {
  std::int64_t kept = 0;     ///< complete records kept
  std::int64_t dropped = 0;  ///< records of steps after the restart step, and a torn last line
  std::int64_t start = 1;    ///< the number of this start of the run: 1 + the largest "start" kept
};

/// Prepares a run's metrics log for a training run that starts at `step` (the restored
/// checkpoint's step; 0 for a fresh start). Records with "step" > `step` were logged by a run that
/// stopped before saving them; the new run logs those steps again, so they are removed and no step
/// appears twice. A last line without its newline (a run killed mid-write) is removed too. The file
/// is rewritten atomically and only when something is removed; a missing file is an empty log.
/// Records without a "start" count as start 1.
MetricsLogResume resume_metrics_log(const std::string& path, std::int64_t step);

/// "1h02m", "3m05s", "12s"; "?" for negative or non-finite values.
std::string format_duration(double seconds);
/// "12.3k", "1.25M", "950" (3 significant digits).
std::string format_count(double value);
/// "1.50 GiB", "12.00 KiB", "512.00 B" (powers of 1024).
std::string format_bytes(double bytes);

/// What one progress line shows.
struct ProgressInfo {
  std::int64_t step = 0;
  std::int64_t total_steps = 0;  ///< 0: unknown (no percentage, no ETA)
  double loss = 0.0;
  double tokens_per_s = 0.0;
  double step_time_s = 0.0;  ///< mean wall-clock seconds per step since the previous report
  double lr = 0.0;
  double eta_s = -1.0;  ///< negative: unknown
};

/// "step   1200/136000 (0.9%) | loss 4.1234 | 52.1k tok/s | lr 1.00e-02 | ETA 3h05m"
std::string format_progress(const ProgressInfo& info);

/// Throughput and ETA from the wall clock: call tick(step, tokens) after each step; rates are
/// measured over the steps since the previous report() (and the ETA from the whole run's rate).
class ProgressMeter {
 public:
  /// `first_step`: the step the run (or resumed run) starts at.
  ProgressMeter(std::int64_t first_step, std::int64_t total_steps);
  /// Counts `tokens` processed by step `step` (just completed).
  void tick(std::int64_t step, std::int64_t tokens);
  /// The line for the last ticked step, and restarts the interval.
  ProgressInfo report(double loss, double lr);
  double elapsed_s() const;

 private:
  using Clock = std::chrono::steady_clock;
  std::int64_t first_step_, total_steps_, step_;
  Clock::time_point start_, interval_start_;
  std::int64_t interval_tokens_ = 0, interval_start_step_;
};

}  // namespace mtk
