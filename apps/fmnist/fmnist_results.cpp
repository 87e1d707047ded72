#include "fmnist_results.hpp"

#include <mtk/base/error.hpp>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace mtk::fmnist {

double Figures::mean_loss(std::int64_t first, std::int64_t last) const {
  double sum = 0;
  for (std::int64_t k = first; k < last; ++k)
    sum += losses[static_cast<size_t>(k)];
  return last > first ? sum / double(last - first) : 0.0;
}

double Figures::accuracy(std::int64_t first, std::int64_t last, std::int64_t batch) const {
  double sum = 0;
  for (std::int64_t k = first; k < last; ++k)
    sum += correct[static_cast<size_t>(k)];
  return last > first ? sum / double((last - first) * batch) : 0.0;
}

MetricRecord step_record(std::int64_t step, std::int64_t epoch, double loss, double correct) {
  return {{"step", step},
          {"kind", std::string("train")},
          {"epoch", epoch},
          {"loss", loss},
          {"correct", correct}};
}

MetricRecord eval_record(std::int64_t step, std::int64_t epoch, double test_loss,
                         double test_accuracy, double seconds) {
  return {{"step", step},           {"kind", std::string("eval")},    {"epoch", epoch},
          {"test_loss", test_loss}, {"test_accuracy", test_accuracy}, {"epoch_seconds", seconds}};
}

namespace {

// A number of a record; null (NaN logged) reads back as NaN.
double number(const nlohmann::json& record, const char* key) {
  const auto& v = record.at(key);
  return v.is_null() ? std::nan("") : v.get<double>();
}

}  // namespace

Figures read_figures(const std::string& path) {
  Figures f;
  std::ifstream in(path);
  std::string line;
  for (std::int64_t n = 1; std::getline(in, line); ++n) {
    try {
      const auto record = nlohmann::json::parse(line);
      const std::string kind = record.value("kind", "");
      if (kind == "train") {
        const auto step = record.at("step").get<std::int64_t>();
        if (step != static_cast<std::int64_t>(f.losses.size()) + 1)
          fail("mtk::fmnist::read_figures", cat("step ", step, " follows step ", f.losses.size()));
        f.losses.push_back(number(record, "loss"));
        f.correct.push_back(number(record, "correct"));
      } else if (kind == "eval") {
        f.epoch_loss.push_back(number(record, "test_loss"));
        f.epoch_accuracy.push_back(number(record, "test_accuracy"));
        f.epoch_seconds.push_back(number(record, "epoch_seconds"));
      }
    } catch (const std::exception& e) {
      fail("mtk::fmnist::read_figures", cat("'", path, "' line ", n, ": ", e.what()));
    }
  }
  return f;
}

std::string result_json(const ResultHeader& h, const Figures& f) {
  // NaN and infinities are not JSON: null (nlohmann-json writes them so).
  nlohmann::ordered_json j;
  j["tool"] = "mtk-fmnist";
  j["ranks"] = h.ranks;
  j["mesh"] = h.mesh;
  j["layout"] = h.layout;
  j["batch"] = h.batch;
  j["epochs"] = f.epoch_accuracy.size();
  j["steps"] = f.losses.size();
  j["optimizer"] = h.optimizer;
  j["lr"] = h.lr;
  j["test_accuracy"] = f.epoch_accuracy.empty() ? nlohmann::ordered_json()
                                                : nlohmann::ordered_json(f.epoch_accuracy.back());
  j["seconds"] = h.seconds;
  j["epoch_test_accuracy"] = f.epoch_accuracy;
  j["epoch_test_loss"] = f.epoch_loss;
  j["epoch_seconds"] = f.epoch_seconds;
  j["losses"] = f.losses;
  j["run_dir"] = h.run_dir;
  return j.dump() + "\n";
}

}  // namespace mtk::fmnist
