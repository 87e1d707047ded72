#pragma once
// SPDX-License-Identifier: Apache-2.0
// The progress of a long phase of a tool (preparing a corpus, translating a file): what is done of
// how much, the rate and the time left. On a terminal the line is redrawn in place; in a log (not
// a terminal) one whole line is written per interval, so a batch job's log stays short.
//
//   ProgressLine p("prepare: encoding", total_bytes, "bytes", {app::says()});
//   while (...) p.update(done_bytes);
//   p.finish();

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace mtk {

struct ProgressLineOptions {
  /// Whether this process prints at all (rank 0 of the tools).
  bool enabled = true;
  /// Where the line goes: stdout, or stderr when stdout carries the tool's output.
  std::FILE* out = stdout;
  /// 1: a terminal (the line is redrawn in place), 0: a log, -1: ask isatty(out).
  int terminal = -1;
  /// Seconds between redraws on a terminal, and between lines in a log.
  double terminal_interval_s = 0.5;
  double log_interval_s = 30.0;
};

/// "12.0 MiB/48.0 MiB (25.0%), 3.00 MiB/s, ETA 12s" for unit "bytes", otherwise
/// "1.20k/4.80k sentences (25.0%), 300 sentences/s, ETA 12s". `total` <= 0: unknown (no share, no
/// ETA). `seconds`: the time the `done` units took (no rate when 0).
std::string format_amount_rate_eta(double done, double total, const std::string& unit,
                                   double seconds);

/// One phase's progress line; see the file comment.
class ProgressLine {
 public:
  ProgressLine(std::string label, double total, std::string unit,
               const ProgressLineOptions& options = {});
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  /// `done` units of `total` so far; printed when the interval has passed. `detail` is appended
  /// ("12.3k pairs").
  void update(double done, const std::string& detail = "");
  /// The phase's last line (always printed when enabled): the whole amount, time and rate.
  /// Without it, a line redrawn on a terminal is erased when the object dies.
  void finish(const std::string& detail = "");
  void set_total(double total) { total_ = total; }
  double seconds() const;
  bool terminal() const { return terminal_; }

 private:
  void print(const std::string& text, bool final_line);
  using Clock = std::chrono::steady_clock;
  std::string label_, unit_;
  double total_, done_ = 0;
  ProgressLineOptions options_;
  bool terminal_ = false, drawn_ = false, finished_ = false;
  Clock::time_point start_, last_;
};

}  // namespace mtk
