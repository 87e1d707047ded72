#include <mtk/base/error.hpp>
#include <mtk/metrics/metrics.hpp>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>

namespace mtk {

namespace {

void append_escaped(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);  // shortest round-trip form: "0.1", "3", "1e+20" (all valid JSON)
}

}  // namespace

std::string to_json(const MetricRecord& record) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, value] : record) {
    if (!first)
      out += ", ";
    first = false;
    append_escaped(out, key);
    out += ": ";
    if (const auto* i = std::get_if<std::int64_t>(&value)) {
      out += std::to_string(*i);
    } else if (const auto* d = std::get_if<double>(&value)) {
      append_double(out, *d);
    } else {
      append_escaped(out, std::get<std::string>(value));
    }
  }
  return out + "}";
}

MetricsWriter::MetricsWriter(const std::string& path, bool truncate) : path_(path) {
  file_ = std::fopen(path.c_str(), truncate ? "w" : "a");
  if (!file_)
    fail("mtk::MetricsWriter", cat("cannot open '", path, "': ", std::strerror(errno)));
}

MetricsWriter::~MetricsWriter() {
  if (file_)
    std::fclose(file_);
}

MetricsWriter::MetricsWriter(MetricsWriter&& o) noexcept
    : path_(std::move(o.path_)), file_(o.file_) {
  o.file_ = nullptr;
}

MetricsWriter& MetricsWriter::operator=(MetricsWriter&& o) noexcept {
  if (this != &o) {
    if (file_)
      std::fclose(file_);
    path_ = std::move(o.path_);
    file_ = o.file_;
    o.file_ = nullptr;
  }
  return *this;
}

void MetricsWriter::write(const MetricRecord& record) {
  if (!file_)
    fail("mtk::MetricsWriter::write", "the writer is not open");
  const std::string line = to_json(record) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    fail("mtk::MetricsWriter::write", cat("cannot write '", path_, "': ", std::strerror(errno)));
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  const auto s = static_cast<std::int64_t>(std::llround(seconds));
  char buf[64];
  if (s >= 86400) {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  } else if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  }
  return buf;
}

std::string format_count(double v) {
  if (!std::isfinite(v))
    return "?";
  const char* suffix = "";
  double x = v;
  if (std::fabs(v) >= 1e9) {
    x = v / 1e9, suffix = "G";
  } else if (std::fabs(v) >= 1e6) {
    x = v / 1e6, suffix = "M";
  } else if (std::fabs(v) >= 1e3) {
    x = v / 1e3, suffix = "k";
  }
  char buf[32];
  if (*suffix == '\0') {
    std::snprintf(buf, sizeof buf, "%.0f", x);
  } else {
    std::snprintf(buf, sizeof buf,
                  std::fabs(x) >= 100  ? "%.0f%s"
                  : std::fabs(x) >= 10 ? "%.1f%s"
                                       : "%.2f%s",
                  x, suffix);
  }
  return buf;
}

std::string format_progress(const ProgressInfo& p) {
  char buf[256];
  std::string text;
  if (p.total_steps > 0) {
    const int width = static_cast<int>(std::to_string(p.total_steps).size());
    std::snprintf(buf, sizeof buf, "step %*lld/%lld (%.1f%%)", width,
                  static_cast<long long>(p.step), static_cast<long long>(p.total_steps),
                  100.0 * static_cast<double>(p.step) / static_cast<double>(p.total_steps));
  } else {
    std::snprintf(buf, sizeof buf, "step %lld", static_cast<long long>(p.step));
  }
  text += buf;
  std::snprintf(buf, sizeof buf, " | loss %.4f | %s tok/s | lr %.2e", p.loss,
                format_count(p.tokens_per_s).c_str(), p.lr);
  text += buf;
  if (p.total_steps > 0)
    text += " | ETA " + format_duration(p.eta_s);
  return text;
}

ProgressMeter::ProgressMeter(std::int64_t first_step, std::int64_t total_steps)
    : first_step_(first_step),
      total_steps_(total_steps),
      step_(first_step),
      start_(Clock::now()),
      interval_start_(start_) {}

void ProgressMeter::tick(std::int64_t step, std::int64_t tokens) {
  step_ = step;
  interval_tokens_ += tokens;
}

double ProgressMeter::elapsed_s() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

ProgressInfo ProgressMeter::report(double loss, double lr) {
  const auto now = Clock::now();
  ProgressInfo p;
  p.step = step_;
  p.total_steps = total_steps_;
  p.loss = loss;
  p.lr = lr;
  const double interval = std::chrono::duration<double>(now - interval_start_).count();
  p.tokens_per_s = interval > 0 ? static_cast<double>(interval_tokens_) / interval : 0.0;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::int64_t done = step_ - first_step_;
  if (total_steps_ > 0 && done > 0 && elapsed > 0)
    p.eta_s = elapsed / static_cast<double>(done) * static_cast<double>(total_steps_ - step_);
  interval_start_ = now;
  interval_tokens_ = 0;
  return p;
}

}  // namespace mtk
