#include <mtk/base/error.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

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

std::optional<std::int64_t> json_int_field(const std::string& line, const std::string& key) {
  // Walks the top-level members of one flat object, skipping string contents, so a key or a
  // value inside a string (a checkpoint path) never matches.
  const size_t n = line.size();
  if (n < 2 || line.front() != '{' || line.back() != '}')
    return std::nullopt;
  auto skip_string = [&](size_t i) {  // i at the opening quote; returns the index after the close
    for (++i; i < n; ++i) {
      if (line[i] == '\\')
        ++i;
      else if (line[i] == '"')
        return i + 1;
    }
    return n;
  };
  const std::string quoted = '"' + key + '"';
  size_t i = 1;
  while (i < n) {
    while (i < n && (line[i] == ' ' || line[i] == ','))
      ++i;
    if (i >= n || line[i] != '"')
      return std::nullopt;
    const size_t key_end = skip_string(i);
    const bool match = line.compare(i, key_end - i, quoted) == 0;
    i = key_end;
    while (i < n && (line[i] == ' ' || line[i] == ':'))
      ++i;
    if (i < n && line[i] == '"') {
      i = skip_string(i);
      continue;
    }
    const size_t value_start = i;
    while (i < n && line[i] != ',' && line[i] != '}')
      ++i;
    if (match) {
      std::int64_t v = 0;
      const char* first = line.data() + value_start;
      const char* last = line.data() + i;
      const auto r = std::from_chars(first, last, v);
      if (r.ec != std::errc() || r.ptr != last)
        return std::nullopt;
      return v;
    }
    if (i < n && line[i] == '}')
      return std::nullopt;
  }
  return std::nullopt;
}

std::string utc_timestamp(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string batch_job_id() {
  for (const char* name : {"SLURM_JOB_ID", "PBS_JOBID"})
    if (const char* v = std::getenv(name); v && *v)
      return v;
  return "local";
}

MetricsLogResume resume_metrics_log(const std::string& path, std::int64_t step) {
  MetricsLogResume r;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return r;  // no log yet
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  std::string kept;
  std::int64_t max_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find('\n', pos);
    if (end == std::string::npos) {  // torn last line: the writer flushes whole lines only
      ++r.dropped;
      break;
    }
    const std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty())
      continue;
    const auto s = json_int_field(line, "step");
    if (s && *s > step) {
      ++r.dropped;
      continue;
    }
    ++r.kept;
    max_start = std::max(max_start, json_int_field(line, "start").value_or(1));
    kept += line;
    kept += '\n';
  }
  r.start = max_start + 1;
  if (r.dropped > 0)
    write_file_atomically(path, kept, "mtk::resume_metrics_log");
  return r;
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

std::string format_bytes(double bytes) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) {
    bytes /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s", bytes, unit[u]);
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
