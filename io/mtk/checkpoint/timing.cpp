#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/checkpoint/impl/timing.hpp>

#include <chrono>
#include <cstdio>
#include <utility>
#include <vector>

namespace mtk::ckpt {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

namespace {

std::vector<std::pair<std::string, double>>& phase_times() {
  static std::vector<std::pair<std::string, double>> t;
  return t;
}

std::vector<std::pair<std::string, std::string>>& notes() {
  static std::vector<std::pair<std::string, std::string>> n;
  return n;
}

}  // namespace

void add_note(const std::string& key, const std::string& value) {
  for (auto& [k, v] : notes())
    if (k == key) {
      v = value;
      return;
    }
  notes().emplace_back(key, value);
}

void add_time(const std::string& phase, double seconds) {
  for (auto& [p, s] : phase_times())
    if (p == phase) {
      s += seconds;
      return;
    }
  phase_times().emplace_back(phase, seconds);
}

void report_times(const std::string& what, bool root) {
  if (root && runtime_options().ckpt_timing()) {
    std::string line;
    for (const auto& [p, s] : phase_times())
      line += cat(" ", p, "=", s);
    for (const auto& [k, v] : notes())
      line += cat(" ", k, "=", v);
    std::fprintf(stderr, "[mtk checkpoint timing] %s:%s\n", what.c_str(), line.c_str());
  }
  phase_times().clear();
  notes().clear();
}

}  // namespace mtk::ckpt
