// The training, evaluation and sampling commands of mtk-lm1b. One YAML config with sections mesh,
// layout, model, train, data, checkpoint, eval; command-line overrides; a run directory with
// config.resolved.yaml, metrics.jsonl and checkpoints/.

#include "mtk_lm1b_run.hpp"

#include <mtk/app/exit_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/data/lm1b_corpus.hpp>
#include <mtk/data/lm_batches.hpp>
#include <mtk/data/token_shards.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/files/files.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>
#include <mtk/signals/stop_signals.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <vector>

namespace mtk::lm1b {
namespace {

int world_rank() {
  return Communicator::world_rank();
}

// Rank 0 prints; every rank keeps going.
template <class... Args>
void say(const char* fmt, Args... args) {
  if (world_rank() == 0) {
    std::printf(fmt, args...);
    std::fflush(stdout);
  }
}

const char* kUsage =
    "usage: mtk-lm1b train  --config FILE [--mesh M] [--layout L] [--set section.key=value]...\n"
    "                       [--run-dir DIR] [--restore CHECKPOINT]\n"
    "       mtk-lm1b eval   --config FILE [--run-dir DIR | --restore CHECKPOINT] [--logit-scale "
    "S]\n"
    "                       [--mesh M] [--layout L] [--set section.key=value]...\n"
    "       mtk-lm1b sample --config FILE [--run-dir DIR | --restore CHECKPOINT] --prompt TEXT\n"
    "                       [--tokens N] [--temperature T] [--seed S]\n";

// Command line shared by the three commands.
struct Options {
  Config config = Config::from_string("{}");
  std::string run_dir, restore, prompt;
  double logit_scale = -1;
  int tokens = 40;
  double temperature = 0.0;
  std::uint64_t seed = 1;
};

Options parse(const std::vector<std::string>& args, const char* command) {
  Options o;
  std::vector<std::string> sets;
  std::string config_path, mesh, layout;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size())
        fail(std::string("mtk-lm1b ") + command, args[i] + " needs a value\n" + kUsage);
      return args[++i];
    };
    const std::string& a = args[i];
    if (a == "--config")
      config_path = value();
    else if (a == "--mesh")
      mesh = value();
    else if (a == "--layout")
      layout = value();
    else if (a == "--set")
      sets.push_back(value());
    else if (a == "--run-dir")
      o.run_dir = value();
    else if (a == "--restore")
      o.restore = value();
    else if (a == "--logit-scale")
      o.logit_scale = std::stod(value());
    else if (a == "--prompt")
      o.prompt = value();
    else if (a == "--tokens")
      o.tokens = std::stoi(value());
    else if (a == "--temperature")
      o.temperature = std::stod(value());
    else if (a == "--seed")
      o.seed = std::stoull(value());
    else
      fail(std::string("mtk-lm1b ") + command, "unknown option '" + a + "'\n" + kUsage);
  }
  if (config_path.empty())
    fail(std::string("mtk-lm1b ") + command, std::string("--config is required\n") + kUsage);
  o.config = Config::from_file(config_path);
  for (const auto& s : sets)
    o.config.apply_override(s);
  if (!mesh.empty())
    o.config.set("mesh", "\"" + mesh + "\"");
  if (!layout.empty())
    o.config.set("layout", "\"" + layout + "\"");
  if (o.run_dir.empty())
    o.run_dir = o.config.get_string("train.run_dir", "run");
  // Every section's keys are checked, so a typo is an error, not a silent default.
  for (const auto& top : o.config.keys())
    if (top != "mesh" && top != "layout" && top != "model" && top != "train" && top != "data" &&
        top != "checkpoint" && top != "eval")
      fail("mtk-lm1b", cat(o.config.origin(), ": unknown section '", top,
                           "' (known: mesh, layout, model, train, data, checkpoint, eval)"));
  reject_unknown_keys(
      o.config, "train",
      {"steps", "seed", "optimizer", "log_every", "run_dir", "learning_rate.schedule",
       "learning_rate.value", "learning_rate.warmup_steps", "learning_rate.total_steps"});
  reject_unknown_keys(o.config, "data", {"dir"});
  reject_unknown_keys(o.config, "checkpoint", {"every", "keep"});
  reject_unknown_keys(o.config, "eval", {"logit_scale", "max_batches"});
  return o;
}

// What every command needs: data, vocabulary, model config, mesh and layout.
struct Setup {
  Lm1bPrepared data;
  Vocab vocab;
  nn::TransformerConfig model;
  MeshShape mesh_shape;
  LayoutRules rules;
  LmBatchOptions batch_options;
};

Setup setup(const Options& o, int ranks) {
  Setup s;
  const std::string dir = o.config.get_string("data.dir");
  s.data = Lm1bPrepared::open(dir);
  s.vocab = Vocab::load(s.data.vocab_model);
  Config cfg = o.config;
  if (!cfg.has("model.vocab_size"))
    cfg.set("model.vocab_size", std::to_string(s.vocab.size()));
  s.model = transformer_config_from(cfg);
  if (s.model.vocab_size != s.vocab.size())
    fail("mtk-lm1b",
         cat(o.config.origin(), ": model.vocab_size = ", s.model.vocab_size, " but the vocabulary ",
             s.data.vocab_model, " has ", s.vocab.size(), " pieces"));
  if (s.model.num_encoder_layers != 0)
    fail("mtk-lm1b",
         cat(o.config.origin(), ": model.num_encoder_layers must be 0 for a language model"));
  s.mesh_shape = o.config.has("mesh") ? o.config.mesh_shape()
                                      : MeshShape::parse("batch:" + std::to_string(ranks));
  s.rules = o.config.layout_rules();
  s.batch_options.global_batch = s.model.batch;
  return s;
}

// This rank's slice of the batch dim: the size of the mesh dim that splits `batch` and the
// coordinate on it.
void set_batch_slice(LmBatchOptions& b, const LayoutRules& rules, const Mesh& mesh) {
  const int axis = rules.mesh_axis_for("batch", mesh.shape());
  b.batch_slices = axis >= 0 ? static_cast<int>(mesh.shape()[axis].size) : 1;
  b.slice_index = axis >= 0 ? mesh.coordinate(axis) : 0;
  if (b.global_batch % b.batch_slices != 0)
    fail("mtk-lm1b", cat("model.batch = ", b.global_batch, " is not divisible by mesh dimension '",
                         mesh.shape()[axis].name, "' of size ", b.batch_slices));
}

std::map<int, HostTensor> local_feeds(const nn::ModelGraph& m, const LmBatch& b) {
  const Shape s{{"batch", b.rows}, {"length", b.length}};
  return {{m.inputs.id(), HostTensor::ints(s, b.inputs)},
          {m.targets.id(), HostTensor::ints(s, b.targets)},
          {m.segments.id(), HostTensor::ints(s, b.segment_ids)},
          {m.positions.id(), HostTensor::ints(s, b.positions)}};
}

optim::LearningRateSchedule schedule_from(const Config& c, std::int64_t steps) {
  optim::LearningRateSchedule lr;
  const std::string kind = c.get_string("train.learning_rate.schedule", "rsqrt_decay");
  if (kind == "constant")
    lr.kind = optim::LearningRateSchedule::Kind::constant;
  else if (kind == "rsqrt_decay")
    lr.kind = optim::LearningRateSchedule::Kind::rsqrt_decay;
  else if (kind == "linear_decay")
    lr.kind = optim::LearningRateSchedule::Kind::linear_decay;
  else if (kind == "adafactor_relative")
    lr.kind = optim::LearningRateSchedule::Kind::adafactor_relative;
  else
    fail("mtk-lm1b", cat(c.origin(), ": train.learning_rate.schedule = '", kind,
                         "'; use constant, rsqrt_decay, linear_decay or adafactor_relative"));
  lr.value = c.get_double("train.learning_rate.value", 0.01);
  lr.warmup_steps = c.get_double("train.learning_rate.warmup_steps", 10000);
  lr.total_steps = c.get_double("train.learning_rate.total_steps", static_cast<double>(steps));
  return lr;
}

std::unique_ptr<optim::Optimizer> optimizer_from(const Config& c) {
  const std::string name = c.get_string("train.optimizer", "adafactor");
  if (name == "adafactor")
    return std::make_unique<optim::Adafactor>();
  if (name == "adam")
    return std::make_unique<optim::Adam>();
  if (name == "sgd")
    return std::make_unique<optim::Sgd>();
  fail("mtk-lm1b", cat(c.origin(), ": train.optimizer = '", name, "'; use adafactor, adam or sgd"));
}

// Restores from --restore, or the newest good checkpoint of the run directory; returns the
// directory restored ("" when none), whose metadata `meta` receives.
std::string restore_weights(Program& program, const Options& o, const Mesh& mesh,
                            CheckpointMetadata* meta, bool required) {
  if (!o.restore.empty()) {
    const std::string path = resolve_checkpoint_path(o.restore);
    restore_checkpoint(program, path, meta);
    return path;
  }
  CheckpointManager manager(o.run_dir, 1000000, mesh);
  manager.set_logger([](const std::string& m) { say("%s\n", m.c_str()); });
  std::string restored;  // the checkpoint actually restored, which `latest` may not name
  if (manager.restore_latest(program, meta, &restored))
    return restored;
  if (required)  // every rank sees the same run directory: fail together
    agree(mesh.comm(), cat("mtk-lm1b: no checkpoint in run directory '", o.run_dir,
                           "'; train first or pass --restore"));
  return "";
}

// parse() and setup() on every rank, agreeing on failure (bad input fails alike everywhere).
std::pair<Options, Setup> agreed_setup(const Communicator& world,
                                       const std::vector<std::string>& args, const char* command) {
  std::optional<std::pair<Options, Setup>> r;
  agree_on_failure(world, [&] {
    Options o = parse(args, command);
    Setup s = setup(o, world.size());
    r.emplace(std::move(o), std::move(s));
  });
  return std::move(*r);
}

// The training losses of the steps since the last log line, averaged: the loss minimised and its
// parts per token (plain cross-entropy, z-loss; label smoothing is the rest) and the MoE loss.
struct LossWindow {
  double loss = 0, cross_entropy = 0, z_loss = 0, aux_loss = 0;
  int steps = 0;

  // The fetches add() reads, in its order.
  static std::vector<Tensor> fetches(const nn::ModelGraph& m, const Tensor& lr) {
    return {m.loss, lr, m.cross_entropy_sum, m.z_loss_sum, m.aux_loss, m.token_count};
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

}  // namespace

int train_main(const std::vector<std::string>& args) {
  const Communicator world = Communicator::world();
  auto [o, s] = agreed_setup(world, args, "train");
  const std::int64_t steps = o.config.get_int("train.steps", 1000);
  const std::int64_t log_every = std::max<std::int64_t>(1, o.config.get_int("train.log_every", 10));
  const std::int64_t ckpt_every = o.config.get_int("checkpoint.every", 1000);
  const int keep = static_cast<int>(o.config.get_int("checkpoint.keep", 3));
  const std::uint64_t seed = static_cast<std::uint64_t>(o.config.get_int("train.seed", 1));

  Mesh mesh(s.mesh_shape, world);
  agree_on_failure(mesh.comm(), [&] {
    if (mesh.rank() == 0) {
      make_directories(o.run_dir, "mtk-lm1b train");
      std::ofstream(o.run_dir + "/config.resolved.yaml") << o.config.dump();
    }
  });

  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, s.model, true, seed);
  auto optimizer = optimizer_from(o.config);
  Tensor lr = optim::minimize(m.loss, *optimizer, schedule_from(o.config, steps));
  say("mtk-lm1b train: %s\n", s.model.to_string().c_str());
  say("  parameters %.2fM (formula %.2fM); mesh %s; layout %s\n", nn::count_parameters(g) / 1e6,
      s.model.analytic_parameter_count() / 1e6, s.mesh_shape.to_string().c_str(),
      s.rules.to_string().c_str());
  auto program = lower(g, mesh, s.rules);
  say("  per rank: variables and slots %.1f MiB, peak %.1f MiB, %.3g FLOPs and %.3g MB of "
      "collectives per step\n",
      program->counters().variable_bytes / 1048576.0, program->counters().peak_bytes / 1048576.0,
      program->counters().total_flops(), program->counters().total_comm_bytes() / 1e6);

  auto train = agree_on_failure(
      mesh.comm(), [&] { return PackedSequences::open(s.data.training_shards, s.model.length); });
  s.batch_options.seed = seed;
  set_batch_slice(s.batch_options, s.rules, mesh);
  LmBatchStream stream(train, s.batch_options);
  say("  data: %lld sequences of %lld tokens (%s tokens) from %zu shards; %lld steps per epoch\n",
      static_cast<long long>(train->size()), static_cast<long long>(s.model.length),
      format_count(static_cast<double>(train->num_tokens())).c_str(), s.data.training_shards.size(),
      static_cast<long long>(stream.batches_per_epoch()));

  CheckpointManager ckpt(o.run_dir, keep, mesh);
  ckpt.set_logger([](const std::string& msg) { say("%s\n", msg.c_str()); });
  CheckpointMetadata meta;
  std::int64_t step = 0;
  const std::string restored = restore_weights(*program, o, mesh, &meta, false);
  if (!restored.empty()) {
    step = meta.step;
    if (!meta.data_position.empty())
      stream.restore(meta.data_position);
    say("  resumed from %s at step %lld\n", restored.c_str(), static_cast<long long>(step));
  }
  install_stop_signal_handlers();
  auto save = [&]() {
    CheckpointMetadata md;
    md.step = step;
    md.config_yaml = o.config.dump();
    md.layout = s.rules.to_string();
    md.data_position = stream.save();
    const std::string path = ckpt.save(*program, md);
    say("  saved checkpoint %s\n", path.c_str());
  };

  // Records after the restored step are dropped: this run logs those steps again.
  MetricsWriter metrics;
  std::int64_t run_start = 1;
  const std::string job = batch_job_id();
  if (world_rank() == 0) {
    run_start = resume_metrics_log(o.run_dir + "/metrics.jsonl", step).start;
    metrics = MetricsWriter(o.run_dir + "/metrics.jsonl");
  }
  ProgressMeter meter(step, steps);
  const std::int64_t first_step = step;
  auto steps_line = [&](const char* what) {
    say("mtk-lm1b train: %s: %lld steps in this job (%lld -> %lld), %lld of %lld overall, in %s\n",
        what, static_cast<long long>(step - first_step), static_cast<long long>(first_step),
        static_cast<long long>(step), static_cast<long long>(step), static_cast<long long>(steps),
        format_duration(meter.elapsed_s()).c_str());
  };
  LossWindow window;
  std::int64_t last_saved = restored.empty() ? -1 : step;
  while (step < steps) {
    LmBatch batch = stream.next();
    auto out = program->run({}, LossWindow::fetches(m, lr), local_feeds(m, batch));
    ++step;
    const double loss = out[0].data<float>()[0];
    if (!std::isfinite(loss))
      fail("mtk-lm1b train", cat("loss is ", loss, " at step ", step));
    window.add(out);
    meter.tick(step, batch.global_tokens);
    if (step % log_every == 0 || step == steps) {
      ProgressInfo info = meter.report(window.mean(window.loss), out[1].data<float>()[0]);
      say("%s\n", format_progress(info).c_str());
      if (metrics.is_open())
        metrics.write({{"step", step},
                       {"loss", window.mean(window.loss)},
                       {"cross_entropy", window.mean(window.cross_entropy)},
                       {"z_loss", window.mean(window.z_loss)},
                       {"aux_loss", window.mean(window.aux_loss)},
                       {"tokens_per_s", info.tokens_per_s},
                       {"lr", static_cast<double>(out[1].data<float>()[0])},
                       {"epoch", stream.position().epoch},
                       {"kind", std::string("train")},
                       {"time", utc_timestamp()},
                       {"job", job},
                       {"start", run_start}});
      window = LossWindow();
    }
    if (ckpt_every > 0 && step % ckpt_every == 0) {
      save();
      last_saved = step;
    }
    if (stop_requested(mesh.comm())) {
      say("  stop requested (signal %d): saving at step %lld\n", stop_signal_number(),
          static_cast<long long>(step));
      if (last_saved != step)
        save();
      steps_line("stopped, resumable");
      return kExitStoppedResumable;
    }
  }
  if (last_saved != step)
    save();
  steps_line("done");
  return 0;
}

int eval_main(const std::vector<std::string>& args) {
  const Communicator world = Communicator::world();
  auto [o, s] = agreed_setup(world, args, "eval");
  const double logit_scale =
      o.logit_scale > 0 ? o.logit_scale : o.config.get_double("eval.logit_scale", 1.0);
  const std::int64_t max_batches = o.config.get_int("eval.max_batches", 0);
  Mesh mesh(s.mesh_shape, world);
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, s.model, false, 1, logit_scale);
  auto program = lower(g, mesh, s.rules);
  CheckpointMetadata meta;
  const std::string path = restore_weights(*program, o, mesh, &meta, true);
  auto heldout = agree_on_failure(
      mesh.comm(), [&] { return PackedSequences::open({s.data.heldout_shard}, s.model.length); });
  s.batch_options.shuffle = false;
  s.batch_options.repeat = false;
  set_batch_slice(s.batch_options, s.rules, mesh);
  LmBatchStream stream(heldout, s.batch_options);
  double total_loss = 0, total_tokens = 0;
  std::int64_t batches = 0;
  while (!stream.done() && (max_batches <= 0 || batches < max_batches)) {
    LmBatch batch = stream.next();
    auto out = program->run({}, {m.cross_entropy_sum, m.token_count}, local_feeds(m, batch));
    total_loss += out[0].data<float>()[0];
    total_tokens += out[1].data<float>()[0];
    ++batches;
  }
  const TokenShardInfo info = TokenShard::read_info(s.data.heldout_shard);
  const bool complete = stream.done();
  const double words = static_cast<double>(info.num_words + info.num_sentences);
  const double log_ppl = total_loss / std::max(1.0, total_tokens);
  const double ppl_word =
      complete ? std::exp(total_loss / words) : std::exp(log_ppl * info.num_tokens / words);
  say("mtk-lm1b eval: %s (step %lld), %lld batches, %.0f tokens, logits x %.2f\n", path.c_str(),
      static_cast<long long>(meta.step), static_cast<long long>(batches), total_tokens,
      logit_scale);
  say("  log-perplexity per token %.4f (perplexity %.2f); perplexity per word %.2f (%.0f words "
      "incl. "
      "end of sentence)%s\n",
      log_ppl, std::exp(log_ppl), ppl_word, words,
      complete ? "" : " [partial pass: per-word figure extrapolated]");
  const std::string line = to_json({{"step", meta.step},
                                    {"log_ppl_per_token", log_ppl},
                                    {"ppl_per_word", ppl_word},
                                    {"tokens", total_tokens},
                                    {"words", words},
                                    {"logit_scale", logit_scale},
                                    {"complete", std::string(complete ? "yes" : "no")},
                                    {"checkpoint", path}});
  say("%s\n", line.c_str());
  if (world_rank() == 0) {
    make_directories(o.run_dir, "mtk-lm1b eval");
    std::ofstream(o.run_dir + "/eval.jsonl", std::ios::app) << line << "\n";
    // The same result in the run's metrics stream, beside the training records.
    MetricsWriter(o.run_dir + "/metrics.jsonl")
        .write({{"step", meta.step},
                {"kind", std::string("eval")},
                {"log_ppl_per_token", log_ppl},
                {"ppl_per_word", ppl_word},
                {"logit_scale", logit_scale},
                {"complete", std::string(complete ? "yes" : "no")},
                {"checkpoint", path},
                {"time", utc_timestamp()},
                {"job", batch_job_id()}});
  }
  return 0;
}

int sample_main(const std::vector<std::string>& args) {
  const Communicator world = Communicator::world();
  auto [o, s] = agreed_setup(world, args, "sample");
  Mesh mesh(s.mesh_shape, world);
  Graph g;
  nn::ModelGraph m = nn::build_transformer(g, s.model, false);
  auto program = lower(g, mesh, s.rules);
  restore_weights(*program, o, mesh, nullptr, true);
  const std::int64_t L = s.model.length, B = s.model.batch, V = s.model.vocab_size;
  std::vector<std::int32_t> tokens = s.vocab.encode(o.prompt);
  if (static_cast<std::int64_t>(tokens.size()) >= L)
    fail("mtk-lm1b sample", cat("the prompt has ", tokens.size(), " tokens; model.length is ", L));
  std::mt19937_64 rng(o.seed);
  const Shape shape{{"batch", B}, {"length", L}};
  for (int t = 0; t < o.tokens && static_cast<std::int64_t>(tokens.size()) < L; ++t) {
    // Every row holds the same text; position i predicts token i + 1.
    std::vector<std::int32_t> in(static_cast<size_t>(B * L), 0), seg(static_cast<size_t>(B * L), 0),
        pos(static_cast<size_t>(B * L), 0), tgt(static_cast<size_t>(B * L), 0);
    const std::int64_t n = static_cast<std::int64_t>(tokens.size());
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t i = 0; i <= n && i < L; ++i) {
        const size_t k = static_cast<size_t>(b * L + i);
        in[k] = i == 0 ? 0 : tokens[static_cast<size_t>(i - 1)];
        seg[k] = 1;
        pos[k] = static_cast<std::int32_t>(i);
      }
    auto out = program->run({{m.inputs.id(), HostTensor::ints(shape, in)},
                             {m.targets.id(), HostTensor::ints(shape, tgt)},
                             {m.segments.id(), HostTensor::ints(shape, seg)},
                             {m.positions.id(), HostTensor::ints(shape, pos)}},
                            {m.logits});
    const float* row = out[0].data<float>() + static_cast<size_t>(n * V);
    std::int32_t next = 0;
    if (o.temperature <= 0) {
      for (std::int64_t v = 1; v < V; ++v)
        if (row[v] > row[next])
          next = static_cast<std::int32_t>(v);
    } else {
      std::vector<double> p(static_cast<size_t>(V));
      double mx = row[0];
      for (std::int64_t v = 0; v < V; ++v)
        mx = std::max(mx, static_cast<double>(row[v]));
      for (std::int64_t v = 0; v < V; ++v)
        p[static_cast<size_t>(v)] = std::exp((row[v] - mx) / o.temperature);
      p[0] = 0;  // never <pad>
      next = static_cast<std::int32_t>(
          std::discrete_distribution<std::int64_t>(p.begin(), p.end())(rng));
    }
    if (next == Vocab::kEosId)
      break;
    tokens.push_back(next);
  }
  say("%s\n", s.vocab.decode(tokens).c_str());
  return 0;
}

}  // namespace mtk::lm1b
