// The training, evaluation and sampling commands of mtk-lm1b. One YAML config with sections mesh,
// layout, model, train, data, checkpoint, eval; command-line overrides; a run directory with
// config.resolved.yaml, metrics.jsonl and checkpoints/.

#include "mtk_lm1b_run.hpp"

#include <mtk/app/exit_status.hpp>
#include <mtk/app/memory_budget.hpp>
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
#include <mtk/nn/training_graph.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>
#include <mtk/parallel/node_reducer.hpp>
#include <mtk/signals/stop_signals.hpp>

#include "auto_plan.hpp"
#include "cli.hpp"
#include "lm1b_config.hpp"
#include "precision_line.hpp"
#include "training.hpp"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <vector>

namespace mtk::lm1b {
namespace {

int world_rank() {
  return Communicator::world_rank();
}

// The command line of train, eval and sample (each accepts the options that apply to it).
struct Options : app::RunOptions {
  std::string prompt;
  double logit_scale = -1;
  int tokens = 40;
  double temperature = 0.0;
  std::uint64_t seed = 1;
};

// Parses the command line of `command`; -1 to go on, else the exit status (0 after --help or
// --version, 2 after a usage error). The same on every rank: no agreement needed.
int parse_command_line(Options& o, const std::vector<std::string>& args,
                       const std::string& command) {
  const char* what = command == "train"  ? "Trains the Transformer language model on data "
                                           "prepared by `mtk-lm1b prepare`."
                     : command == "eval" ? "Evaluates a checkpoint on the held-out shard: "
                                           "perplexity per token and per word."
                                         : "Generates text from a checkpoint.";
  CLI::App app{what, "mtk-lm1b " + command};
  cli::configure(app);
  app::add_run_options(app, o, "apps/lm1b/configs/*.yaml",
                       command == "train"
                           ? "Starts from this checkpoint instead of the run's newest"
                           : "The checkpoint to use instead of the run's newest");
  if (command == "train" || command == "eval")
    app::add_check_options(
        app, o,
        "Checks config, data, rank count and memory, builds the program, prints its "
        "cost per rank, and exits without " +
            std::string(command == "train" ? "training or writing anything" : "evaluating"));
  if (command == "train")
    app::add_train_options(app, o);
  if (command == "eval")
    app.add_option("--logit-scale", o.logit_scale,
                   "Multiplies the logits (default: eval.logit_scale, else 1)")
        ->type_name("S")
        ->check(cli::positive_number());
  if (command == "sample") {
    app.add_option("--prompt", o.prompt, "The text to continue")->type_name("TEXT");
    app.add_option("--tokens", o.tokens, "Tokens to generate, at most (40)")
        ->type_name("N")
        ->check(cli::integer_in(1, 1000000));
    app.add_option("--temperature", o.temperature, "0: the most likely token (0)")
        ->type_name("T")
        ->check(cli::non_negative_number());
    app.add_option("--seed", o.seed, "Sampling seed (1)")->type_name("S");
  }
  return cli::parse(app, args, world_rank() == 0);
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

Setup setup(const Options& o, const Settings& settings, int ranks) {
  Setup s;
  const std::string& dir = settings.data_dir;
  if (dir.empty())
    fail("mtk-lm1b", cat(o.config.origin(),
                         ": data.dir is missing: give the folder `mtk-lm1b "
                         "prepare --out` wrote"));
  s.data = Lm1bPrepared::open(dir);
  s.vocab = Vocab::load(s.data.vocab_model);
  s.model = app::model_for_vocabulary(o.config, s.vocab.size(), s.data.vocab_model, "mtk-lm1b");
  if (s.model.num_encoder_layers != 0)
    fail("mtk-lm1b",
         cat(o.config.origin(), ": model.num_encoder_layers must be 0 for a language model"));
  // `mesh: auto` / `layout: auto`: set by the plan (start()).
  if (!app::is_auto(o.config, "mesh"))
    s.mesh_shape = app::mesh_for_ranks(o.config, ranks, "mtk-lm1b");
  if (!app::is_auto(o.config, "layout"))
    s.rules = o.config.layout_rules();
  s.batch_options.global_batch = s.model.batch;
  return s;
}

// This rank's slice of the batch dim: the size of the mesh dim that splits `batch` and the
// coordinate on it.
void set_batch_slice(LmBatchOptions& b, const LayoutRules& rules, const Mesh& mesh) {
  const app::BatchSlice slice =
      app::batch_slice(rules, mesh, b.global_batch, "model.batch", "mtk-lm1b");
  b.batch_slices = slice.slices;
  b.slice_index = slice.index;
}

std::map<int, HostTensor> local_feeds(const nn::ModelGraph& m, const LmBatch& b) {
  const Shape s{{"batch", b.rows}, {"length", b.length}};
  return {{m.inputs.id(), HostTensor::ints(s, b.inputs)},
          {m.targets.id(), HostTensor::ints(s, b.targets)},
          {m.segments.id(), HostTensor::ints(s, b.segment_ids)},
          {m.positions.id(), HostTensor::ints(s, b.positions)}};
}

// What a command starts from: the command line, the config and its settings, and (unless only
// the config is wanted) the data, vocabulary, model, mesh and layout.
struct Start {
  Options o;
  Settings settings;
  Setup s;
};

// Parses the command line; then, on every rank agreeing on failure (bad input fails alike
// everywhere), loads and checks the config and sets up. Returns the exit status when the
// command is done already (--help, --version, a usage error, --print-config), else -1.
int start(Start& st, const Communicator& world, const std::vector<std::string>& args,
          const std::string& command) {
  if (const int status = parse_command_line(st.o, args, command); status >= 0)
    return status;
  bool vocab_known = true;
  nn::TransformerConfig printed_model;  // --print-config: the model as far as it is known
  agree_on_failure(world, [&] {
    app::load_config(st.o);
    st.settings = read_settings(st.o.config);
    if (st.o.print_config) {
      const std::string vocab =
          st.settings.data_dir.empty() ? "" : Lm1bPrepared::vocab_path(st.settings.data_dir);
      printed_model = app::model_for_printing(st.o.config, vocab, vocab_known);
      st.o.config = effective_config(st.o.config, st.settings, printed_model, world.size());
      return;
    }
    st.s = setup(st.o, st.settings, world.size());
    st.o.vocab_fingerprint = app::fingerprint_text(st.s.vocab.fingerprint());
  });
  if (st.o.print_config) {
    app::print_config(st.o.config, vocab_known,
                      app::plan_for_printing(st.o.config, printed_model, st.settings, st.o.run_dir,
                                             vocab_known, world, "mtk-lm1b"));
    return 0;
  }
  const app::AutoPlan plan =
      app::plan_auto(st.o.config, st.s.model, st.settings, st.o.run_dir, world, "mtk-lm1b");
  if (plan.planned()) {
    st.s.mesh_shape = plan.mesh;
    st.s.rules = plan.rules;
  }
  agree_on_failure(world, [&] {
    st.o.resolved_yaml =
        (plan.planned() ? plan.yaml_comment() : "") +
        effective_config(st.o.config, st.settings, st.s.model, world.size()).dump();
  });
  set_node_allreduce(st.settings.program.node_allreduce);  // program.node_allreduce
  return -1;
}

void check_cost(Graph& g, const Setup& s, const Mesh& mesh) {
  app::check_cost(g, s.mesh_shape, s.rules, mesh, s.model.to_string());
}

// Token shards whose header names another vocabulary size than the model's would feed ids the
// embedding does not have.
void check_shards_match(const PackedSequences& data, const Setup& s, const std::string& what) {
  if (data.vocab_size() != s.model.vocab_size)
    fail("mtk-lm1b", cat("the ", what, " token shards were encoded with a vocabulary of ",
                         data.vocab_size(), " pieces, but model.vocab_size = ", s.model.vocab_size,
                         " (", s.data.vocab_model, "); run `mtk-lm1b prepare` again"));
}

}  // namespace

int train_main(const std::vector<std::string>& args) {
  // First (app_main did it already for `mtk-lm1b train`): a stop signal during the start-up,
  // seconds for a big model, is recorded and honoured below instead of killing one rank.
  install_stop_signal_handlers();
  const Communicator world = Communicator::world();
  Start start_state;
  if (const int status = start(start_state, world, args, "train"); status >= 0)
    return status;
  Options& o = start_state.o;
  Setup& s = start_state.s;
  const Settings& settings = start_state.settings;
  const std::uint64_t seed = settings.seed;

  Mesh mesh(s.mesh_shape, world);
  Graph g(settings.program);
  nn::ModelGraph m;
  Tensor lr, gradient_norm;  // what training logs besides the losses
  auto optimizer = config::make_optimizer(settings.optimizer);
  if (settings.optimizer.shard)  // train.shard_optimizer (docs/sharded-optimizer.md)
    optimizer->set_sharding({s.rules, s.mesh_shape});
  // A model whose sizes overflow fails alike on every rank: one agreed error, no abort.
  agree_on_failure(mesh.comm(), [&] {
    // train.microbatches: the batch as slices in series, one optimizer step (docs/memory.md).
    nn::TrainingGraph t = nn::build_training(g, s.model, static_cast<int>(settings.microbatches),
                                             *optimizer, settings.lr, seed);
    m = t.model;
    lr = t.lr;
    gradient_norm = t.gradient_norm;
  });
  app::say("mtk-lm1b train: %s\n", s.model.to_string().c_str());
  app::say("  parameters %.2fM (formula %.2fM); mesh %s; layout %s\n",
           nn::count_parameters(g) / 1e6, s.model.analytic_parameter_count() / 1e6,
           s.mesh_shape.to_string().c_str(), s.rules.to_string().c_str());
  app::say_precision("mtk-lm1b", s.model, settings.optimizer);
  // With the sharded update its slots are stored split: the optimizer's per-tensor rules.
  app::check_cost(g, s.mesh_shape, optimizer->layout_rules(s.rules), mesh, s.model.to_string());

  auto train = agree_on_failure(mesh.comm(), [&] {
    auto data = PackedSequences::open(s.data.training_shards, s.model.length);
    check_shards_match(*data, s, "training");
    return data;
  });
  s.batch_options.seed = seed;
  agree_on_failure(mesh.comm(), [&] { set_batch_slice(s.batch_options, s.rules, mesh); });
  LmBatchStream stream(train, s.batch_options);
  app::say(
      "  data: %lld sequences of %lld tokens (%s tokens) from %zu shards; %lld steps per epoch\n",
      static_cast<long long>(train->size()), static_cast<long long>(s.model.length),
      format_count(static_cast<double>(train->num_tokens())).c_str(), s.data.training_shards.size(),
      static_cast<long long>(stream.batches_per_epoch()));
  if (o.dry_run) {
    app::verify_token_shards(mesh.comm(), s.data.training_shards);
    app::say(
        "mtk-lm1b train --dry-run: config, data (every token checksum), %d rank(s) and memory "
        "check out; nothing was trained or written\n",
        world.size());
    return 0;
  }

  auto program = lower(g, mesh, optimizer->layout_rules(s.rules));
  app::TrainingData data;
  data.next = [&] {
    LmBatch batch = stream.next();
    return app::TrainingData::Batch{local_feeds(m, batch), batch.global_tokens};
  };
  data.save = [&] { return stream.save(); };
  data.restore = [&](const std::string& position) { stream.restore(position); };
  data.epoch = [&] { return stream.position().epoch; };
  return app::run_training("mtk-lm1b train", *program,
                           {m, lr, gradient_norm, s.model.contraction_precision()}, mesh, o,
                           settings, s.rules, data);
}

int eval_main(const std::vector<std::string>& args) {
  const Communicator world = Communicator::world();
  Start start_state;
  if (const int status = start(start_state, world, args, "eval"); status >= 0)
    return status;
  Options& o = start_state.o;
  Setup& s = start_state.s;
  const double logit_scale =
      o.logit_scale > 0 ? o.logit_scale : start_state.settings.eval_logit_scale;
  const std::int64_t max_batches = start_state.settings.eval_max_batches;
  Mesh mesh(s.mesh_shape, world);
  Graph g(start_state.settings.program);
  auto m = agree_on_failure(
      mesh.comm(), [&] { return nn::build_transformer(g, s.model, false, 1, logit_scale); });
  check_cost(g, s, mesh);
  auto heldout = agree_on_failure(mesh.comm(), [&] {
    auto data = PackedSequences::open({s.data.heldout_shard}, s.model.length);
    check_shards_match(*data, s, "held-out");
    return data;
  });
  s.batch_options.shuffle = false;
  s.batch_options.repeat = false;
  agree_on_failure(mesh.comm(), [&] { set_batch_slice(s.batch_options, s.rules, mesh); });
  if (o.dry_run) {
    app::verify_token_shards(mesh.comm(), {s.data.heldout_shard});
    app::say(
        "mtk-lm1b eval --dry-run: config, data (every token checksum), %d rank(s) and memory check "
        "out; nothing was "
        "evaluated\n",
        world.size());
    return 0;
  }
  auto program = lower(g, mesh, s.rules);
  CheckpointMetadata meta;
  const std::string path = app::restore_weights(*program, o, mesh, &meta, true, "mtk-lm1b");
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
  app::say("mtk-lm1b eval: %s (step %lld), %lld batches, %.0f tokens, logits x %.2f\n",
           path.c_str(), static_cast<long long>(meta.step), static_cast<long long>(batches),
           total_tokens, logit_scale);
  app::say(
      "  log-perplexity per token %.4f (perplexity %.2f); perplexity per word %.2f (%.0f words "
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
  app::say("%s\n", line.c_str());
  agree_on_failure(mesh.comm(), [&] {
    if (world_rank() == 0) {
      make_directories(o.run_dir, "mtk::make_directories");
      append_to_file(o.run_dir + "/eval.jsonl", line + "\n", "mtk::append_to_file");
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
  });
  return 0;
}

int sample_main(const std::vector<std::string>& args) {
  const Communicator world = Communicator::world();
  Start start_state;
  if (const int status = start(start_state, world, args, "sample"); status >= 0)
    return status;
  Options& o = start_state.o;
  Setup& s = start_state.s;
  Mesh mesh(s.mesh_shape, world);
  Graph g(start_state.settings.program);
  auto m = agree_on_failure(mesh.comm(), [&] { return nn::build_transformer(g, s.model, false); });
  check_cost(g, s, mesh);
  auto program = lower(g, mesh, s.rules);
  app::restore_weights(*program, o, mesh, nullptr, true, "mtk-lm1b");
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
  app::say("%s\n", s.vocab.decode(tokens).c_str());
  return 0;
}

}  // namespace mtk::lm1b
