// SPDX-License-Identifier: Apache-2.0
#include <mtk/base/error.hpp>
#include <mtk/data/progress_line.hpp>
#include <mtk/metrics/metrics.hpp>

#include <algorithm>
#include <unistd.h>

namespace mtk {

namespace {
std::string amount(double value, const std::string& unit) {
  return unit == "bytes" ? format_bytes(value) : format_count(value);
}
}  // namespace

std::string format_amount_rate_eta(double done, double total, const std::string& unit,
                                   double seconds) {
  const bool bytes = unit == "bytes";
  std::string text = amount(done, unit);
  if (total > 0) {
    char share[32];
    std::snprintf(share, sizeof share, " (%.1f%%)", 100.0 * std::min(done, total) / total);
    text += "/" + amount(total, unit) + (bytes ? "" : " " + unit) + share;
  } else if (!bytes) {
    text += " " + unit;
  }
  if (seconds > 0 && done > 0) {
    const double rate = done / seconds;
    text += cat(", ", amount(rate, unit), bytes ? "/s" : " " + unit + "/s");
    if (total > done)
      text += ", ETA " + format_duration((total - done) / rate);
  }
  return text;
}

ProgressLine::ProgressLine(std::string label, double total, std::string unit,
                           const ProgressLineOptions& options)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      options_(options),
      start_(Clock::now()),
      last_(start_) {
  terminal_ =
      options_.terminal < 0 ? ::isatty(::fileno(options_.out)) == 1 : options_.terminal == 1;
}

ProgressLine::~ProgressLine() {
  // A phase that ends without finish() (its caller reports it, or it failed) leaves no half line
  // on a terminal for the next output to run into.
  if (options_.enabled && terminal_ && drawn_ && !finished_) {
    std::fputs("\r\033[K", options_.out);
    std::fflush(options_.out);
  }
}

double ProgressLine::seconds() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void ProgressLine::print(const std::string& text, bool final_line) {
  if (terminal_)
    std::fprintf(options_.out, "\r%s\033[K%s", text.c_str(), final_line ? "\n" : "");
  else
    std::fprintf(options_.out, "%s\n", text.c_str());
  std::fflush(options_.out);
  drawn_ = !final_line;
}

void ProgressLine::update(double done, const std::string& detail) {
  done_ = done;
  if (!options_.enabled)
    return;
  const auto now = Clock::now();
  const double interval = terminal_ ? options_.terminal_interval_s : options_.log_interval_s;
  if (std::chrono::duration<double>(now - last_).count() < interval)
    return;
  last_ = now;
  print(cat(label_, ": ", format_amount_rate_eta(done_, total_, unit_, seconds()),
            detail.empty() ? "" : ", " + detail),
        false);
}

void ProgressLine::finish(const std::string& detail) {
  if (!options_.enabled || finished_)
    return;
  finished_ = true;
  const double s = seconds();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f s", s);
  std::string text = cat(label_, ": ", amount(done_, unit_), unit_ == "bytes" ? "" : " " + unit_,
                         " in ", s < 60 ? std::string(took) : format_duration(s));
  if (s > 0 && done_ > 0)
    text += cat(", ", amount(done_ / s, unit_), unit_ == "bytes" ? "/s" : " " + unit_ + "/s");
  print(text + (detail.empty() ? "" : ", " + detail), true);
}

}  // namespace mtk
