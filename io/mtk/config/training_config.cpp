#include <mtk/base/error.hpp>
#include <mtk/config/training_config.hpp>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace mtk::config {
namespace {

using T = TrainingSettings;

Schema<T> make_train_schema() {
  Schema<T> s;
  s.integer("steps", &T::steps, 0, kMaxSteps,
            "training steps (global batches); 0 saves the initial weights as step 0 and stops")
      .integer("seed", &T::seed, 0, std::numeric_limits<std::int64_t>::max(),
               "data order, weight initialisation and dropout")
      .integer("log_every", &T::log_every, 1, kMaxSteps,
               "steps per progress line and metrics record")
      .text("run_dir", &T::run_dir, "the run directory when --run-dir is not given")
      .integer("microbatches", &T::microbatches, 1, 1 << 20,
               "slices each batch runs as, in series, their gradients summed before one "
               "optimizer step (less activation memory); must divide model.batch "
               "(docs/memory.md)")
      .text("memory_per_rank", &T::memory_per_rank,
            "memory per rank that `mesh: auto` / `layout: auto` plan for, e.g. 4GiB or 8e9 "
            "(docs/memory.md#mesh-auto)")
      .default_text("memory_per_rank", "the machine's")
      .text("machine", &T::machine,
            "machine file (layouts/machines/*.yaml, `mtk-layout calibrate`) `mesh: auto` "
            "predicts step times with")
      .default_text("machine", "RUN_DIR/machine.yaml, else built-in")
      .nested("learning_rate", &T::lr, learning_rate_schema())
      .default_from(
          "learning_rate.total_steps",
          [](T& t) { t.lr.total_steps = static_cast<double>(t.steps); }, "train.steps")
      .nested("", &T::optimizer, optimizer_schema());
  return s;
}

Schema<T> make_checkpoint_schema() {
  Schema<T> s;
  s.integer("every", &T::checkpoint_every, 1, kMaxSteps,
            "steps between checkpoints (one is also saved at the end)")
      .integer("keep", &T::checkpoint_keep, 1, 1000000, "checkpoints kept, the newest")
      .boolean("fletcher32", &T::checkpoint_fletcher32,
               "chunked checkpoint datasets also carry HDF5's Fletcher32 checksum (saves take "
               "2-6x as long with HDF5 1.10; writes become collective)");
  return s;
}

}  // namespace

std::int64_t parse_byte_size(const std::string& text, const std::string& where,
                             const std::string& what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(where, what + " '" + text + "' is not a number of bytes");
  }
  const std::string unit = text.substr(used);
  const std::vector<std::pair<std::string, double>> units = {{"", 1},
                                                             {"B", 1},
                                                             {"K", 1e3},
                                                             {"M", 1e6},
                                                             {"G", 1e9},
                                                             {"T", 1e12},
                                                             {"KiB", 1024.0},
                                                             {"MiB", 1048576.0},
                                                             {"GiB", 1073741824.0},
                                                             {"TiB", 1099511627776.0}};
  for (const auto& [u, f] : units)
    if (unit == u) {
      if (!(v > 0))
        fail(where, what + " '" + text + "' must be > 0");
      // Whole bytes, at least one and inside 64 bits ("0.5" is not "no limit", "1e30" and "inf"
      // no wrapped figure); a fraction of a larger unit rounds down ("1.5K" = 1500).
      std::int64_t bytes = 0;
      const double b = std::floor(v * f);
      if (!config::whole_int64(b, bytes) || bytes > (std::int64_t{1} << 62))
        fail(where, cat(what, " '", text, "' is not a number of bytes in [1, 2^62]"));
      if (bytes < 1)
        fail(where, cat(what, " '", text, "' is less than one byte (", v * f,
                        "); give a size such as 512MiB or 4GiB"));
      return bytes;
    }
  fail(where, what + " '" + text + "': unknown unit '" + unit + "'");
}

const Schema<TrainingSettings>& train_schema() {
  static const Schema<TrainingSettings> schema = make_train_schema();
  return schema;
}

const Schema<TrainingSettings>& checkpoint_schema() {
  static const Schema<TrainingSettings> schema = make_checkpoint_schema();
  return schema;
}

TrainingSettings read_training_settings(const Config& config) {
  TrainingSettings s = train_schema().read(config, "train");
  if (!s.memory_per_rank.empty())
    parse_byte_size(s.memory_per_rank, "mtk::config::read_training_settings",
                    config.origin() + ": train.memory_per_rank");
  s = checkpoint_schema().read(config, "checkpoint", s);
  s.program = program_schema().read(config, "program");
  // float32 variables are never rounded: stochastic would silently do nothing.
  if (s.optimizer.variable_rounding == Rounding::stochastic &&
      s.optimizer.variable_dtype != DType::bfloat16)
    fail("mtk::config::read_training_settings",
         cat(config.origin(),
             ": train.variable_rounding = 'stochastic' needs "
             "train.variable_dtype: bfloat16, not '",
             dtype_name(s.optimizer.variable_dtype),
             "': float32 variables are not rounded; set train.variable_dtype: bfloat16 or "
             "train.variable_rounding: nearest"));
  // Hyperparameters of another optimizer would silently do nothing.
  for (const auto& name : optimizer_names()) {
    const auto keys = config.keys("train." + name);
    if (name != s.optimizer.name && !keys.empty())
      fail("mtk::config::read_training_settings",
           cat(config.origin(), ": train.", name, ".", keys.front(),
               " is set but train.optimizer is '", s.optimizer.name,
               "': it would have no effect; set train.optimizer: ", name, " or remove the train.",
               name, " settings"));
  }
  return s;
}

void write_training_settings(Config& config, const TrainingSettings& s) {
  train_schema().write(config, "train", s);
  for (const auto& name : optimizer_names())
    if (name != s.optimizer.name)
      config.erase("train." + name);  // only the chosen optimizer's hyperparameters
  checkpoint_schema().write(config, "checkpoint", s);
  program_schema().write(config, "program", s.program);
}

}  // namespace mtk::config
