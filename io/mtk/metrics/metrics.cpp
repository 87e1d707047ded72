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
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace mtk {

namespace {

// One JSON value as nlohmann writes it: strings escaped (invalid UTF-8 replaced, never thrown),
// doubles in the shortest text that reads back to the same value, NaN and infinities as null.
std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json to_value(const MetricValue& value) {
  return std::visit([](const auto& v) { return nlohmann::json(v); }, value);
}

// `line` parsed as one JSON object; a discarded value when it is not one (a torn line).
nlohmann::json parse_object(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : nlohmann::json(nlohmann::json::value_t::discarded);
}

std::optional<std::int64_t> int_member(const nlohmann::json& object, const std::string& key) {
  if (!object.is_object())
    return std::nullopt;
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer())
    return std::nullopt;
  if (it->is_number_unsigned() &&
      it->get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    return std::nullopt;
  return it->get<std::int64_t>();
}

}  // namespace

std::string to_json(const MetricRecord& record) {
  // Keys and values are written by nlohmann in the record's order; the separators ", " and ": "
  // are the ones metrics.jsonl has always had (job scripts grep for '"kind": "train"').
  std::string out = "{";
  for (const auto& [key, value] : record) {
    if (out.size() > 1)
      out += ", ";
    out += dump(key) + ": " + dump(to_value(value));
  }
  return out + "}";
}

double metric_from_float(float value) {
  if (!std::isfinite(value))
    return static_cast<double>(value);
  char text[64];
  const auto r = std::to_chars(text, text + sizeof text, value);  // shortest text of the float
  double out = static_cast<double>(value);
  std::from_chars(text, r.ptr, out);
  return out;
}

double model_flops_utilization(double model_flops, int processors, double step_time_s,
                               double ceiling_flops_per_s) {
  if (!(model_flops > 0 && processors > 0 && step_time_s > 0 && ceiling_flops_per_s > 0))
    return std::numeric_limits<double>::quiet_NaN();
  return model_flops / (processors * step_time_s * ceiling_flops_per_s);
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
  return int_member(parse_object(line), key);
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
    const nlohmann::json record = parse_object(line);
    const auto s = int_member(record, "step");
    if (s && *s > step) {
      ++r.dropped;
      continue;
    }
    ++r.kept;
    max_start = std::max(max_start, int_member(record, "start").value_or(1));
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
      interval_start_(start_),
      interval_start_step_(first_step) {}

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
  const std::int64_t interval_steps = step_ - interval_start_step_;
  p.step_time_s = interval_steps > 0 ? interval / static_cast<double>(interval_steps) : 0.0;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const std::int64_t done = step_ - first_step_;
  if (total_steps_ > 0 && done > 0 && elapsed > 0)
    p.eta_s = elapsed / static_cast<double>(done) * static_cast<double>(total_steps_ - step_);
  interval_start_ = now;
  interval_start_step_ = step_;
  interval_tokens_ = 0;
  return p;
}

}  // namespace mtk
