#include "fmnist_training.hpp"

#include <mtk/app/exit_status.hpp>
#include <mtk/app/run_dir_lock.hpp>
#include <mtk/app/run_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/files/files.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/signals/stop_signals.hpp>

#include "checkpoint_match.hpp"
#include "fmnist_results.hpp"
#include "say.hpp"
#include "training.hpp"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace mtk::fmnist {
namespace {

constexpr const char* kTool = "mtk-fmnist";
using Clock = std::chrono::steady_clock;

long long ll(std::int64_t v) {
  return static_cast<long long>(v);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// One training job: its inputs, the step reached, the figures so far (rank 0's are the run's;
// the other ranks keep only their count) and rank 0's metrics log.
struct Job {
  const Settings& s;
  const Mesh& mesh;
  const Dataset& data;
  Trainer& trainer;
  const JobOptions& o;
  std::int64_t images = 0, per_epoch = 0, total = 0, step = 0;
  Figures figures;
  MetricsWriter metrics;
  std::int64_t start = 1;
  std::string job_id = batch_job_id();

  Job(const Settings& settings, const Mesh& m, const Dataset& d, Trainer& t, const JobOptions& opt)
      : s(settings), mesh(m), data(d), trainer(t), o(opt) {}
  void status(RunState state, int code, const std::string& message = "") const {
    if (mesh.rank() == 0)
      write_run_status(o.run_dir, state, step, total, code, kTool, message);
  }
  void log(MetricRecord record) {
    if (!metrics.is_open())
      return;
    record.push_back({"time", utc_timestamp()});
    record.push_back({"job", job_id});
    record.push_back({"start", start});
    metrics.write(record);
  }
};

void save_checkpoint(Job& job, CheckpointManager& ckpt) {
  CheckpointMetadata md;
  md.step = job.step;
  md.config_yaml = job.o.resolved_yaml;
  md.layout = job.o.layout;
  // Informational: the position follows from the step (the data order from the seed and epoch).
  md.data_position = cat("epoch ", job.step / job.per_epoch, " batch ", job.step % job.per_epoch);
  app::say("  saved checkpoint " + ckpt.save(job.trainer.program(), md) + "\n");
}

// The keys whose change makes a resumed run not continue the checkpoint's: the data order (batch,
// images, seed) and the optimizer. Another value fails naming each key and both values, or with
// --restore (a deliberate start from another run) is only told.
void check_same_run(const Job& job, const CheckpointMetadata& meta, const std::string& path) {
  const Config then = Config::from_string(meta.config_yaml, path + "/metadata.yaml");
  const Config now = Config::from_string(job.o.resolved_yaml);
  std::string differences;
  for (const char* key :
       {"train.batch", "data.train_limit", "train.seed", "train.optimizer", "train.lr"}) {
    const std::string a = then.has(key) ? then.get_string(key) : "(none)";
    const std::string b = now.get_string(key);
    if (a != b)
      differences += cat(differences.empty() ? "" : ", ", key, " ", a, " -> ", b);
  }
  if (differences.empty())
    return;
  const std::string what = cat("the checkpoint ", path, " was trained with other settings (",
                               differences, "): the run would not continue it");
  if (job.o.restore.empty())
    fail(kTool, what + "; use the checkpoint's settings, or --restore to start from it anyway");
  app::say(cat("  note: ", what, "\n"));
}

// Restores --restore or the run's newest complete checkpoint (the step goes to its) and prepares
// metrics.jsonl: the records after that step are dropped, those before read back into the figures.
// Returns the checkpoint restored ("" when none).
std::string resume(Job& job, CheckpointManager& ckpt) {
  Program& program = job.trainer.program();
  CheckpointMetadata meta;
  std::string restored;
  if (!job.o.restore.empty()) {
    restored = resolve_checkpoint_path(job.o.restore);
    restore_checkpoint(program, restored, &meta);
  } else if (!ckpt.restore_latest(program, &meta, &restored)) {
    restored.clear();
  }
  if (!restored.empty()) {
    agree_on_failure(job.mesh.comm(), [&] { check_same_run(job, meta, restored); });
    config::TrainingSettings now;  // the program and checkpoint settings the apps share
    now.program = job.s.program;
    now.checkpoint_fletcher32 = job.s.checkpoint_fletcher32;
    if (job.mesh.rank() == 0)
      app::tell_setting_changes(meta, now, restored);
    job.step = meta.step;
    app::say(cat("  resumed from ", restored, " at step ", job.step, "\n"));
  }
  const std::string path = job.o.run_dir + "/metrics.jsonl";
  agree_on_failure(job.mesh.comm(), [&] {
    if (job.mesh.rank() != 0)
      return;
    const MetricsLogResume r = resume_metrics_log(path, job.step);
    job.start = r.start;
    job.figures = read_figures(path);
    job.metrics = MetricsWriter(path);
  });
  const auto known = static_cast<std::int64_t>(job.figures.losses.size());
  if (job.mesh.rank() == 0 && known < job.step)
    app::say(cat("  ", path, " holds the figures of ", known, " steps, not ", job.step,
                 " (a checkpoint of another run): the others are null in the result\n"));
  const double unknown = std::numeric_limits<double>::quiet_NaN();
  job.figures.losses.resize(static_cast<size_t>(job.step), unknown);
  job.figures.correct.resize(static_cast<size_t>(job.step), unknown);
  return restored;
}

// Evaluates the test set after step `k` + 1 of epoch `epoch` (0-based), logs and prints it.
void evaluate(Job& job, std::int64_t epoch, std::int64_t k, Clock::time_point epoch_start) {
  const auto test =
      job.trainer.evaluate(job.data.test_images, job.data.test_labels, job.s.test_limit);
  const double seconds = seconds_since(epoch_start);
  Figures& f = job.figures;
  f.epoch_accuracy.push_back(test.correct);
  f.epoch_loss.push_back(test.loss);
  f.epoch_seconds.push_back(seconds);
  job.log(eval_record(job.step, epoch + 1, test.loss, test.correct, seconds));
  app::say("epoch %lld: %lld steps, train loss %.4f, test loss %.4f, test accuracy %.4f, %.1f s\n",
           ll(epoch + 1), ll(k + 1), f.mean_loss(job.step - k - 1, job.step), test.loss,
           test.correct, seconds);
}

// Rank 0 writes RUN_DIR/result.json (and the --json copy).
void write_result(const Job& job, double seconds) {
  if (job.mesh.rank() != 0)
    return;
  ResultHeader h;
  h.ranks = job.mesh.size();
  h.mesh = job.mesh.shape().to_string();
  h.layout = job.o.layout;
  h.optimizer = job.s.model.optimizer;
  h.run_dir = job.o.run_dir;
  h.batch = job.s.model.batch;
  h.lr = job.s.model.lr;
  h.seconds = seconds;
  const std::string text = result_json(h, job.figures);
  write_file_atomically(job.o.run_dir + "/result.json", text, "mtk::fmnist::write_result");
  if (!job.o.json_path.empty())
    write_file_atomically(job.o.json_path, text, "mtk::fmnist::write_result");
}

// The steps from the one reached to the last: progress lines, the test set after every epoch,
// checkpoints, stop signals. `saved`: whether the step reached is a checkpoint already.
int train_steps(Job& job, CheckpointManager& ckpt, bool saved) {
  const Settings& s = job.s;
  const std::int64_t first_step = job.step;
  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1, last_saved = saved ? job.step : -1;
  const auto start = Clock::now();
  auto epoch_start = start;
  while (job.step < job.total) {
    const std::int64_t epoch = job.step / job.per_epoch, k = job.step % job.per_epoch;
    if (epoch != order_epoch) {
      order = epoch_order(job.images, s.model.seed, epoch);
      order_epoch = epoch;
    }
    if (k == 0)
      epoch_start = Clock::now();
    const std::vector<std::int64_t> batch(order.begin() + k * s.model.batch,
                                          order.begin() + (k + 1) * s.model.batch);
    const auto r = job.trainer.step(job.data.train_images, job.data.train_labels, batch);
    ++job.step;
    job.figures.losses.push_back(r.loss);
    job.figures.correct.push_back(r.correct);
    job.log(step_record(job.step, epoch + 1, r.loss, r.correct));
    if ((k + 1) % s.log_every == 0)
      app::say("  epoch %lld step %lld/%lld: loss %.4f (mean %.4f), train accuracy %.4f\n",
               ll(epoch + 1), ll(k + 1), ll(job.per_epoch), r.loss,
               job.figures.mean_loss(job.step - k - 1, job.step),
               job.figures.accuracy(job.step - k - 1, job.step, s.model.batch));
    if (k + 1 == job.per_epoch || job.step == job.total)
      evaluate(job, epoch, k, epoch_start);
    if (job.step % s.checkpoint_every == 0 || job.step == job.total) {
      save_checkpoint(job, ckpt);
      last_saved = job.step;
    }
    if (stop_requested(job.mesh.comm())) {
      const int signal = job.mesh.comm().max(stop_signal_number());
      app::say(cat("  stop requested (signal ", signal, "): saving at step ", job.step, "\n"));
      if (last_saved != job.step)
        save_checkpoint(job, ckpt);
      app::say(cat(kTool, ": stopped, resumable: steps ", first_step, " -> ", job.step, " of ",
                   job.total, " in ", format_duration(seconds_since(start)), "\n"));
      job.status(RunState::stopped, kExitStoppedResumable, cat("stop signal ", signal));
      return kExitStoppedResumable;
    }
  }
  if (last_saved != job.step)
    save_checkpoint(job, ckpt);
  const double seconds = seconds_since(start);
  agree_on_failure(job.mesh.comm(), [&] { write_result(job, seconds); });
  const Figures& f = job.figures;
  app::say("%s: test accuracy %.4f after %lld steps (%lld in this job) in %.1f s -> %s\n", kTool,
           f.epoch_accuracy.empty() ? 0.0 : f.epoch_accuracy.back(), ll(job.step),
           ll(job.step - first_step), seconds, (job.o.run_dir + "/result.json").c_str());
  job.status(RunState::completed, kExitOk);
  return kExitOk;
}

// run_training after the lock: restore, the resolved config, the training loop.
int run_locked(Job& job) {
  CheckpointOptions written;
  written.fletcher32 = job.s.checkpoint_fletcher32;  // checkpoint.fletcher32
  CheckpointManager ckpt(job.o.run_dir, job.s.checkpoint_keep, job.mesh, written);
  ckpt.set_logger([](const std::string& m) { app::say(m + "\n"); });
  const std::string restored = resume(job, ckpt);
  agree_on_failure(job.mesh.comm(), [&] {
    if (job.mesh.rank() == 0)
      write_file_atomically(job.o.run_dir + "/config.resolved.yaml", job.o.resolved_yaml,
                            "mtk::write_file_atomically");
  });
  job.status(RunState::running, 0);
  if (stop_requested(job.mesh.comm())) {
    app::say(cat(kTool, ": stop requested (signal ", job.mesh.comm().max(stop_signal_number()),
                 ") during start-up, before step ", job.step + 1, " ran; nothing new was saved ",
                 "(exit ", kExitStoppedBeforeStart, ")\n"));
    job.status(RunState::stopped_before_start, kExitStoppedBeforeStart);
    return kExitStoppedBeforeStart;
  }
  return train_steps(job, ckpt, !restored.empty());
}

}  // namespace

int run_training(const Settings& s, const Mesh& mesh, const Dataset& data, Trainer& trainer,
                 const JobOptions& o) {
  Job job(s, mesh, data, trainer, o);
  job.images = s.train_limit > 0 ? s.train_limit : data.train_images.count;
  job.per_epoch = job.images / s.model.batch;
  if (job.per_epoch < 1)
    fail(kTool, cat(job.images, " training images make no batch of train.batch = ", s.model.batch,
                    "; lower train.batch or raise data.train_limit"));
  job.total = s.epochs * job.per_epoch;
  if (s.steps > 0)
    job.total = std::min(job.total, s.steps);
  const RunDirLock lock = app::lock_run_dir(mesh, o.run_dir, kTool);  // the job's, to its end
  try {
    return run_locked(job);
  } catch (const std::exception& e) {
    try {
      job.status(RunState::failed, kExitError, e.what());
    } catch (const std::exception&) {  // the error being reported matters more
    }
    throw;
  }
}

}  // namespace mtk::fmnist
