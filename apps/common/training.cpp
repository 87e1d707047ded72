#include "training.hpp"

#include <mtk/app/device_report.hpp>
#include <mtk/app/exit_status.hpp>
#include <mtk/app/memory_budget.hpp>
#include <mtk/app/run_dir_lock.hpp>
#include <mtk/app/run_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/matmul_ceiling.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/metrics/peak_memory.hpp>
#include <mtk/signals/stop_signals.hpp>

#include "checkpoint_match.hpp"
#include "init_from.hpp"
#include "layout_check.hpp"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <optional>
#include <sstream>

namespace mtk::app {

void add_run_options(CLI::App& app, RunOptions& o, const std::string& configs,
                     const std::string& restore_help) {
  app.add_option("--config", o.config_path, "The YAML config (" + configs + ")")
      ->required()
      ->type_name("FILE");
  app.add_option("--mesh", o.mesh, "Overrides `mesh`, e.g. \"batch:2;model:2\"")->type_name("M");
  app.add_option("--layout", o.layout, "Overrides `layout`, e.g. \"batch:batch;vocab:model\"")
      ->type_name("L");
  app.add_option("--set", o.sets, "Overrides one setting (repeatable), e.g. train.steps=100")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--run-dir", o.run_dir,
                 "The run directory: config.resolved.yaml, metrics.jsonl, checkpoints/ "
                 "(default: train.run_dir, else \"run\")")
      ->type_name("DIR");
  app.add_option("--restore", o.restore, restore_help)->type_name("CHECKPOINT");
}

void add_check_options(CLI::App& app, RunOptions& o, const std::string& dry_run_help) {
  app.add_flag("--print-config", o.print_config,
               "Prints the resolved config (file, --set, --mesh, --layout) as YAML, the run-time "
               "options (MTK_*) as comments, and exits");
  app.add_flag("--dry-run", o.dry_run, dry_run_help);
  add_strict_layout_flag(app, o.strict_layout);  // the commands whose check_cost() checks
}

void verify_token_shards(const Communicator& comm, const std::vector<std::string>& paths) {
  agree_on_failure(comm, [&] {
    for (std::size_t i = static_cast<std::size_t>(comm.rank()); i < paths.size();
         i += static_cast<std::size_t>(comm.size()))
      TokenShard::open(paths[i]).tokens();
  });
}

void add_train_options(CLI::App& app, RunOptions& o) {
  app.add_flag("--fresh-start", o.fresh_start,
               "Starts again at step 1 in a run directory that has history (metrics, "
               "checkpoints) but no usable checkpoint; the old metrics.jsonl is kept, renamed");
  add_init_from_options(app, o);
}

namespace {
// --strict-layout of this process's command (load_config() records it for check_cost()).
bool strict_layout_rules = false;
}  // namespace

void load_config(RunOptions& o) {
  strict_layout_rules = o.strict_layout;
  o.config = Config::from_file(o.config_path);
  for (const auto& s : o.sets) {
    // `--set mesh=auto`, `--set layout=batch:batch`: the whole mesh or layout, as --mesh and
    // --layout set it (a map's keys are names, not settings).
    const std::string key = s.substr(0, s.find('='));
    if ((key == "mesh" || key == "layout") && s.size() > key.size() + 1)
      o.config.set(key, "\"" + s.substr(key.size() + 1) + "\"");
    else
      o.config.apply_override(s);
  }
  if (!o.mesh.empty())
    o.config.set("mesh", "\"" + o.mesh + "\"");
  if (!o.layout.empty())
    o.config.set("layout", "\"" + o.layout + "\"");
  if (o.run_dir.empty())
    o.run_dir = o.config.get_string("train.run_dir", TrainingSettings().run_dir, {});
}

namespace {

// `text` as YAML comment lines: "# " before each line, a newline after each.
std::string yaml_comment(const std::string& text) {
  std::istringstream lines(text);
  std::string out, line;
  while (std::getline(lines, line))
    out += "# " + line + "\n";
  return out;
}

}  // namespace

void print_config(const Config& config, bool vocab_known, const std::string& plan_comment) {
  Config shown = config;
  if (!vocab_known)
    shown.erase("model.vocab_size");
  say(shown.dump());
  if (!vocab_known)
    say("# model.vocab_size: the size of data.dir's vocabulary (not readable yet)\n");
  say(plan_comment);
  say(yaml_comment(describe_runtime_options()));
}

void check_cost(Graph& g, const MeshShape& mesh_shape, const LayoutRules& rules, const Mesh& mesh,
                const std::string& model_text) {
  // A rule for a dim no model has (a typo) splits nothing: said, or refused alike on every rank.
  agree_on_failure(mesh.comm(), [&] {
    check_layout_rules(g, rules, transformer_dim_names, strict_layout_rules,
                       "mtk::app::check_cost");
  });
  // Sizes that overflow (checked arithmetic) fail here on every rank alike: agreed, not aborted.
  auto plan =
      agree_on_failure(mesh.comm(), [&] { return analyze(g, mesh_shape, rules, mesh.rank()); });
  const auto& c = plan->counters();
  char line[256];
  std::snprintf(line, sizeof line,
                "  per rank: variables and slots %.1f MiB, peak %.1f MiB, %.3g FLOPs and %.3g MB "
                "of collectives per step\n",
                c.variable_bytes / 1048576.0, c.peak_bytes / 1048576.0, c.total_flops(),
                c.total_comm_bytes() / 1e6);
  say(std::string(line));  // as is: a char array would pick the printf form
  check_memory_fits(mesh.comm(), c.peak_bytes,
                    cat("the model (", model_text, ") on mesh ", mesh_shape.to_string()));
}

std::string fingerprint_text(std::uint64_t fingerprint) {
  char text[32];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

namespace {

// Rank 0: a status.json left "running" by a job that is gone (killed -9: nothing could record its
// end) is recorded as "killed", and said. Never fails the command: the run matters more.
void settle_run_status(const Mesh& mesh, const std::string& run_dir, const std::string& tool,
                       bool lock_held) {
  std::string note;
  if (mesh.rank() == 0) {
    try {
      note = settle_stale_run_status(run_dir, tool, lock_held);
    } catch (const std::exception& e) {
      note = cat("cannot record the end of the job before this one in '", run_dir,
                 "/status.json': ", e.what());
    }
  }
  if (!note.empty())
    say("  " + note + "\n");
}

}  // namespace

std::string restore_weights(Program& program, const RunOptions& o, const Mesh& mesh,
                            CheckpointMetadata* meta_out, bool required, const std::string& tool) {
  settle_run_status(mesh, o.run_dir, tool, false);
  CheckpointMetadata local;
  CheckpointMetadata* meta = meta_out ? meta_out : &local;
  if (!o.restore.empty()) {
    const std::string path = resolve_checkpoint_path(o.restore);
    restore_checkpoint(program, path, meta);
    // Every rank read the same metadata: a failure is agreed (exit 1 on each, no MPI_Abort).
    agree_on_failure(mesh.comm(), [&] {
      check_vocabulary(*meta, o, path, tool);
      check_model(*meta, o, path, tool, true);
    });
    return path;
  }
  CheckpointManager manager(o.run_dir, 1000000, mesh);
  manager.set_logger([](const std::string& m) { say(m + "\n"); });
  std::string restored;  // the checkpoint actually restored, which `latest` may not name
  if (manager.restore_latest(program, meta, &restored)) {
    agree_on_failure(mesh.comm(), [&] {
      check_vocabulary(*meta, o, restored, tool);
      check_model(*meta, o, restored, tool, false);
    });
    return restored;
  }
  if (required)  // every rank sees the same run directory: fail together
    agree(mesh.comm(), cat(tool, ": no checkpoint in run directory '", o.run_dir,
                           "'; train first or pass --restore"));
  return "";
}

namespace {

// The training losses of the steps since the last log line, averaged: the loss minimised and its
// parts per token (plain cross-entropy, z-loss; label smoothing is the rest) and the MoE loss.
struct LossWindow {
  double loss = 0, cross_entropy = 0, z_loss = 0, aux_loss = 0;
  int steps = 0;

  // The fetches add() reads, in its order; the last step's learning rate is out[1] and its
  // gradients' global norm out[6].
  static std::vector<Tensor> fetches(const TrainedModel& model) {
    const nn::ModelGraph& m = model.graph;
    return {m.loss,     model.lr,      m.cross_entropy_sum, m.z_loss_sum,
            m.aux_loss, m.token_count, model.gradient_norm};
  }
  void add(const std::vector<HostTensor>& out) {
    auto value = [&](size_t k) { return static_cast<double>(out[k].data<float>()[0]); };
    const double tokens = std::max(1.0, value(5));
    loss += value(0);
    cross_entropy += value(2) / tokens;
    z_loss += value(3) / tokens;
    aux_loss += value(4);
    ++steps;
  }
  double mean(double sum) const { return sum / std::max(1, steps); }
};

std::string resolved_yaml(const RunOptions& o) {
  return o.resolved_yaml.empty() ? o.config.dump() : o.resolved_yaml;
}

long long ll(std::int64_t v) {
  return static_cast<long long>(v);
}

// What in RUN_DIR says a run was here ("" for nothing): metrics or anything under checkpoints/.
std::string run_history(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string what;
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  if (fs::exists(metrics, ec) && fs::file_size(metrics, ec) > 0)
    what = cat("metrics.jsonl (", fs::file_size(metrics, ec), " bytes)");
  const fs::path ckpts = fs::path(run_dir) / "checkpoints";
  if (fs::is_directory(ckpts, ec) && !fs::is_empty(ckpts, ec))
    what += cat(what.empty() ? "" : " and ", "checkpoints/ (none usable)");
  return what;
}

// The matmul FLOPs of one step of the model in `g` on one processor: the work MFU counts (as the
// layout search does), whatever the mesh adds.
double model_matmul_flops(Graph& g) {
  return analyze(g, MeshShape::parse("all:1"), LayoutRules())
      ->counters()
      .flops_of(FlopClass::einsum);
}

// The matmul FLOP/s one processor reaches at `precision` (kernels::matmul_ceiling), every rank
// measuring at once so that each gets its share of its node; the mean over the ranks. Collective.
double matmul_ceiling_per_processor(const Mesh& mesh, Precision precision) {
  const kernels::MatmulRate rate =
      agree_on_failure(mesh.comm(), [&] { return kernels::matmul_ceiling(precision); });
  const double per_processor = mesh.comm().sum(rate.gflops) / mesh.size();
  say(cat("  MFU against a matmul ceiling of ", format_count(per_processor * 1e9),
          "FLOP/s per processor (", precision_name(precision), ", ", rate.backend,
          "; measured on every rank at once)\n"));
  return per_processor * 1e9;
}

// What the parts of one training job share: run_training's arguments and the step reached.
struct TrainingJob {
  const std::string& tool;
  Program& program;
  const TrainedModel& model;
  const Mesh& mesh;
  const RunOptions& o;
  const TrainingSettings& settings;
  const LayoutRules& rules;
  TrainingData& data;
  std::int64_t& step;
  /// Where the weights came from (WeightsOrigin as YAML; "" from the initializers): --init-from,
  /// or the restored checkpoint's record. Every checkpoint of the run keeps it.
  std::string& origin;

  // Rank 0 records the run's state in the run directory's status file; a fine-tune's says where
  // its weights came from unless there is more to say.
  void status(RunState state, int code, const std::string& message = "") const {
    if (mesh.rank() != 0)
      return;
    std::string said = message;
    if (said.empty() && !origin.empty()) {
      try {
        said = "weights from " + WeightsOrigin::parse(origin, tool).summary();
      } catch (const std::exception&) {  // a record this version cannot read: the run matters more
        said = "weights from another checkpoint (init_from in config.resolved.yaml)";
      }
    }
    write_run_status(o.run_dir, state, step, settings.steps, code, tool, said);
  }
};

// History but nothing to resume from: never start again silently, never drop old metrics.
void refuse_or_start_fresh(const TrainingJob& job) {
  const RunOptions& o = job.o;
  agree_on_failure(job.mesh.comm(), [&] {
    if (job.mesh.rank() != 0)
      return;
    const std::string history = run_history(o.run_dir);
    if (history.empty())
      return;
    if (!o.fresh_start)
      fail(job.tool, cat("run directory '", o.run_dir, "' has a history (", history,
                         ") but no checkpoint to resume from; pass --fresh-start to train again "
                         "from step 1 there (the old metrics.jsonl is kept, renamed), --restore "
                         "CHECKPOINT to start from a checkpoint, or use another --run-dir"));
    const std::string metrics = o.run_dir + "/metrics.jsonl";
    if (std::filesystem::exists(metrics)) {
      std::string stamp = utc_timestamp();
      std::replace(stamp.begin(), stamp.end(), ':', '-');
      const std::string kept = metrics + ".before-fresh-start-" + stamp;
      rename_path(metrics, kept, "mtk::rename_path");
      say(cat("  --fresh-start: the old metrics are kept as ", kept, "\n"));
    }
  });
}

// Restores --restore or the run's newest checkpoint with its data position (the step goes to the
// checkpoint's), else refuses or starts fresh; returns the checkpoint restored ("" when none).
// With --init-from (init_from.hpp): the run's own checkpoints resume when they descend from that
// source; without any, the source's trained weights load and the run starts at step 0.
std::string resume(const TrainingJob& job) {
  const std::string app_name = job.tool.substr(0, job.tool.find(' '));
  std::optional<InitFromPlan> init;
  if (!job.o.init_from.empty())
    init = plan_init_from(job.o, job.model.graph.loss.graph(), job.mesh, job.tool);
  CheckpointMetadata meta;
  const std::string restored =
      restore_weights(job.program, job.o, job.mesh, &meta, false, app_name);
  if (!restored.empty()) {
    if (init)
      agree_on_failure(job.mesh.comm(), [&] {
        check_resumed_origin(meta.init_from, restored, *init, job.o, job.tool);
      });
    job.step = meta.step;
    job.origin = meta.init_from;
    if (!meta.data_position.empty())
      agree_on_failure(job.mesh.comm(), [&] { job.data.restore(meta.data_position); });
    say(cat("  resumed from ", restored, " at step ", job.step, "\n"));
    tell_setting_changes(meta, job.settings, restored);
  } else {
    refuse_or_start_fresh(job);
    if (init) {
      load_init_weights(job.program, *init, job.mesh, job.tool);
      job.origin = init->origin.to_yaml();
    }
  }
  return restored;
}

void save_checkpoint(const TrainingJob& job, CheckpointManager& ckpt) {
  CheckpointMetadata md;
  md.step = job.step;
  md.config_yaml = resolved_yaml(job.o);
  md.layout = job.rules.to_string();
  md.data_position = job.data.save();
  md.vocab_fingerprint = job.o.vocab_fingerprint;
  md.init_from = job.origin;
  const std::string path = ckpt.save(job.program, md);
  say("  saved checkpoint " + path + "\n");
}

// Where metrics.jsonl records go: rank 0's writer, and the identity of this job in them.
struct MetricsLog {
  MetricsWriter writer;
  std::int64_t run_start = 1;
  std::string job_id = batch_job_id();
  double model_flops = 0;    // matmul FLOPs of one step of the model (rank 0), for MFU
  double ceiling_flops = 0;  // one processor's matmul FLOP/s (0: unknown, no MFU)

  // Records after the restored step are dropped: this run logs those steps again.
  explicit MetricsLog(const TrainingJob& job) {
    const Mesh& mesh = job.mesh;
    agree_on_failure(mesh.comm(), [&] {
      if (mesh.rank() == 0) {
        const std::string path = job.o.run_dir + "/metrics.jsonl";
        run_start = resume_metrics_log(path, job.step).start;
        writer = MetricsWriter(path);
        model_flops = model_matmul_flops(job.model.graph.loss.graph());
      }
    });
    ceiling_flops = matmul_ceiling_per_processor(mesh, job.model.precision);
  }

  // The progress line and (rank 0) the metrics record of the steps in `window`; `out`: the last
  // step's fetches. Collective (the peak memory is the most of any rank).
  void log(const TrainingJob& job, ProgressMeter& meter, const LossWindow& window,
           const std::vector<HostTensor>& out) {
    const double lr = metric_from_float(out[1].data<float>()[0]);
    ProgressInfo info = meter.report(window.mean(window.loss), lr);
    say(format_progress(info) + "\n");
    const std::int64_t peak_memory = job.mesh.comm().max(peak_resident_bytes());
    if (writer.is_open())
      writer.write({{"step", job.step},
                    {"loss", window.mean(window.loss)},
                    {"cross_entropy", window.mean(window.cross_entropy)},
                    {"z_loss", window.mean(window.z_loss)},
                    {"aux_loss", window.mean(window.aux_loss)},
                    {"tokens_per_s", info.tokens_per_s},
                    {"step_time_s", info.step_time_s},
                    {"mfu", model_flops_utilization(model_flops, job.mesh.size(), info.step_time_s,
                                                    ceiling_flops)},
                    {"gradient_norm", metric_from_float(out[6].data<float>()[0])},
                    {"peak_memory_bytes", peak_memory},
                    {"lr", lr},
                    {"epoch", job.data.epoch()},
                    {"kind", std::string("train")},
                    {"time", utc_timestamp()},
                    {"job", job_id},
                    {"start", run_start}});
  }
};

// The training loop from the step reached to settings.steps: progress lines and metrics, periodic
// checkpoints, stop signals. `saved`: whether the step reached is a checkpoint already.
int train_steps(const TrainingJob& job, CheckpointManager& ckpt, bool saved) {
  const std::string& tool = job.tool;
  const Mesh& mesh = job.mesh;
  std::int64_t& step = job.step;
  const std::int64_t steps = job.settings.steps;
  MetricsLog metrics(job);
  ProgressMeter meter(step, steps);
  const std::int64_t first_step = step;
  auto steps_line = [&](const char* what) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "%s: %s: %lld steps in this job (%lld -> %lld), %lld of %lld overall, in %s\n",
                  tool.c_str(), what, ll(step - first_step), ll(first_step), ll(step), ll(step),
                  ll(steps), format_duration(meter.elapsed_s()).c_str());
    say(std::string(line));  // as is: a char array would pick the printf form
  };
  LossWindow window;
  std::int64_t last_saved = saved ? step : -1;
  while (step < steps) {
    TrainingData::Batch batch = job.data.next();
    auto out = job.program.run({}, LossWindow::fetches(job.model), batch.feeds);
    ++step;
    const double loss = out[0].data<float>()[0];
    if (!std::isfinite(loss))
      fail(tool, cat("loss is ", loss, " at step ", step));
    window.add(out);
    meter.tick(step, batch.global_tokens);
    if (step % job.settings.log_every == 0 || step == steps) {
      metrics.log(job, meter, window, out);
      window = LossWindow();
    }
    if (job.settings.checkpoint_every > 0 && step % job.settings.checkpoint_every == 0) {
      save_checkpoint(job, ckpt);
      last_saved = step;
    }
    if (stop_requested(mesh.comm())) {
      // The signal one rank received, which every rank reports.
      say(cat("  stop requested (signal ", mesh.comm().max(stop_signal_number()),
              "): saving at step ", step, "\n"));
      if (last_saved != step)
        save_checkpoint(job, ckpt);
      steps_line("stopped, resumable");
      job.status(RunState::stopped, kExitStoppedResumable,
                 cat("stop signal ", mesh.comm().max(stop_signal_number())));
      return kExitStoppedResumable;
    }
  }
  if (last_saved != step)
    save_checkpoint(job, ckpt);
  steps_line("done");
  job.status(RunState::completed, kExitOk);
  return kExitOk;
}

// Where a fine-tune's weights came from, as YAML comments ("" for none): "# init_from:" and the
// record's lines indented under it.
std::string origin_comment(const std::string& origin) {
  if (origin.empty())
    return "";
  std::istringstream lines(origin);
  std::string out = "# init_from:  (train --init-from: where this run's weights came from)\n", line;
  while (std::getline(lines, line))
    out += "#   " + line + "\n";
  return out;
}

// run_training after the lock: restore or refuse, the training loop, the status file.
int run_training_locked(const TrainingJob& job) {
  const Mesh& mesh = job.mesh;
  CheckpointOptions written;
  written.fletcher32 = job.settings.checkpoint_fletcher32;  // checkpoint.fletcher32
  CheckpointManager ckpt(job.o.run_dir, job.settings.checkpoint_keep, mesh, written);
  ckpt.set_logger([](const std::string& msg) { say(msg + "\n"); });
  const std::string restored = resume(job);
  // After the restore: a refused one leaves the run's record as it was, and a fine-tune's
  // record says where its weights came from (comments: the file still reads as a config).
  agree_on_failure(mesh.comm(), [&] {
    if (mesh.rank() == 0)
      write_file_atomically(job.o.run_dir + "/config.resolved.yaml",
                            origin_comment(job.origin) + resolved_yaml(job.o),
                            "mtk::write_file_atomically");
  });
  job.status(RunState::running, 0);
  if (stop_requested(mesh.comm())) {
    say(cat(job.tool, ": stop requested (signal ", mesh.comm().max(stop_signal_number()),
            ") during start-up, before step ", job.step + 1, " ran; nothing new was saved (exit ",
            kExitStoppedBeforeStart, ")\n"));
    job.status(RunState::stopped_before_start, kExitStoppedBeforeStart);
    return kExitStoppedBeforeStart;
  }
  return train_steps(job, ckpt, !restored.empty());
}

}  // namespace

RunDirLock lock_run_dir(const Mesh& mesh, const std::string& run_dir, const std::string& tool) {
  RunDirLock lock;
  agree_on_failure(mesh.comm(), [&] {
    if (mesh.rank() == 0) {
      make_directories(run_dir, "mtk::make_directories");
      lock = RunDirLock(run_dir, tool);
    }
  });
  if (!lock.took_over().empty())
    say(cat("  run directory lock taken over from a job that is no longer running (",
            lock.took_over(), ")\n"));
  // Holding the lock, a status "running" is a job that ended without recording how.
  settle_run_status(mesh, run_dir, tool, true);
  return lock;
}

int run_training(const std::string& tool, Program& program, const TrainedModel& model,
                 const Mesh& mesh, const RunOptions& o, const TrainingSettings& settings,
                 const LayoutRules& rules, TrainingData& data) {
  const std::int64_t steps = settings.steps;
  std::int64_t step = 0;
  const bool writes_status = mesh.rank() == 0;
  // Which device each rank computes on: a wrong GPU binding shows here, before the first step.
  for (const std::string& line : device_report(mesh.comm(), tool))
    say(line + "\n");
  const RunDirLock lock = lock_run_dir(mesh, o.run_dir, tool);
  try {
    std::string origin;
    return run_training_locked(
        {tool, program, model, mesh, o, settings, rules, data, step, origin});
  } catch (const std::exception& e) {
    if (writes_status) {
      try {
        write_run_status(o.run_dir, RunState::failed, step, steps, kExitError, tool, e.what());
      } catch (const std::exception&) {  // the error being reported matters more
      }
    }
    throw;
  }
}

}  // namespace mtk::app
