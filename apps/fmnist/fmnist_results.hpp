#pragma once
// The figures of an mtk-fmnist run: RUN_DIR/metrics.jsonl (one record per step, one per test
// evaluation; a resumed run drops the records after its checkpoint and logs those steps again),
// read back into Figures, and the result JSON (RUN_DIR/result.json, --json) written from them with
// nlohmann-json (strings escaped; NaN and infinities written as null).

#include <mtk/metrics/metrics.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::fmnist {

/// Every step's figures and every evaluation's, in order.
struct Figures {
  std::vector<double> losses;   ///< the loss of step k + 1
  std::vector<double> correct;  ///< the training images step k + 1 classified right
  std::vector<double> epoch_accuracy, epoch_loss, epoch_seconds;  ///< per test evaluation
  /// The mean loss and accuracy of steps [first, last) (0-based; 0 when empty), summed in step
  /// order, so that a resumed run prints the same figures.
  double mean_loss(std::int64_t first, std::int64_t last) const;
  double accuracy(std::int64_t first, std::int64_t last, std::int64_t batch) const;
};

/// The metrics records of one training step and of one test evaluation.
MetricRecord step_record(std::int64_t step, std::int64_t epoch, double loss, double correct);
MetricRecord eval_record(std::int64_t step, std::int64_t epoch, double test_loss,
                         double test_accuracy, double seconds);

/// The figures metrics.jsonl at `path` holds (none when it is missing). A train record whose step
/// does not follow the one before fails naming the file and the line.
Figures read_figures(const std::string& path);

/// What the result JSON says besides the figures.
struct ResultHeader {
  int ranks = 1;
  std::string mesh, layout, optimizer, run_dir;
  std::int64_t batch = 0;
  double lr = 0, seconds = 0;  ///< seconds: this job's training time
};
/// The result JSON: tool, ranks, mesh, layout, batch, epochs, steps, optimizer, lr,
/// test_accuracy (the last evaluation's; null before any), seconds, epoch_test_accuracy,
/// epoch_test_loss, epoch_seconds, losses, run_dir.
std::string result_json(const ResultHeader& header, const Figures& figures);

}  // namespace mtk::fmnist
