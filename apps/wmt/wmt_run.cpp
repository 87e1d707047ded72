// mtk-wmt train and translate: the encoder-decoder Transformer on any mesh and layout, trained on
// `mtk-wmt prepare`'s token shards, and batched beam search with the incremental decoder.

#include <mtk/base/error.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/data/prepare_record.hpp>
#include <mtk/data/progress_line.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/data/wmt_pairs.hpp>
#include <mtk/decode/decode.hpp>
#include <mtk/files/files.hpp>
#include <mtk/nn/training_graph.hpp>
#include <mtk/parallel/node_reducer.hpp>
#include <mtk/signals/stop_signals.hpp>
#include <mtk/text/bleu.hpp>
#include <mtk/text/sgm.hpp>

#include "auto_plan.hpp"
#include "cli.hpp"
#include "precision_line.hpp"
#include "training.hpp"
#include "translate_pieces.hpp"
#include "wmt_commands.hpp"
#include "wmt_config.hpp"
#include <algorithm>
#include <cstdio>
#include <numeric>

namespace mtk::wmt {
namespace {

// What both commands need: data, vocabulary, model config, mesh and layout.
struct Setup {
  PreparedPaths data;
  Vocab vocab;
  nn::TransformerConfig model;
  MeshShape mesh_shape;
  LayoutRules rules;
  ProgramOptions program;  ///< program.*
};

Setup setup(const app::RunOptions& o, const Settings& settings, int ranks) {
  Setup s;
  s.program = settings.train.program;
  s.data.dir = settings.data.dir;
  if (s.data.dir.empty())
    fail("mtk-wmt", cat(o.config.origin(),
                        ": data.dir is missing: give the folder `mtk-wmt "
                        "prepare` wrote"));
  s.vocab = Vocab::load(s.data.vocab());
  s.model = app::model_for_vocabulary(o.config, s.vocab.size(), s.data.vocab(), "mtk-wmt");
  if (s.model.num_encoder_layers <= 0)
    fail("mtk-wmt",
         cat(o.config.origin(),
             ": model.num_encoder_layers must be > 0 for translation (encoder-decoder)"));
  // `mesh: auto` / `layout: auto`: set by the plan (start()).
  if (!app::is_auto(o.config, "mesh"))
    s.mesh_shape = app::mesh_for_ranks(o.config, ranks, "mtk-wmt");
  if (!app::is_auto(o.config, "layout"))
    s.rules = o.config.layout_rules();
  return s;
}

std::map<int, HostTensor> feeds(const nn::ModelGraph& m, const PairBatch& b) {
  const Shape s{{"batch", b.rows}, {"length", b.length}};
  return {{m.inputs.id(), HostTensor::ints(s, b.inputs)},
          {m.targets.id(), HostTensor::ints(s, b.targets)},
          {m.segments.id(), HostTensor::ints(s, b.segments)},
          {m.positions.id(), HostTensor::ints(s, b.positions)},
          {m.encoder_inputs.id(), HostTensor::ints(s, b.sources)},
          {m.encoder_segments.id(), HostTensor::ints(s, b.source_segments)},
          {m.encoder_positions.id(), HostTensor::ints(s, b.source_positions)}};
}

// Parses, loads and checks the config, and sets up, all ranks agreeing on failure. Returns the
// exit status when done already (--help, a usage error, --print-config), else -1.
int start(CLI::App& app, app::RunOptions& o, Settings& settings, Setup& s,
          const Communicator& world, const std::vector<std::string>& args) {
  if (const int status = cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  bool vocab_known = true;
  nn::TransformerConfig printed_model;  // --print-config: the model as far as it is known
  agree_on_failure(world, [&] {
    app::load_config(o);
    settings = read_settings(o.config);
    if (o.print_config) {
      const std::string vocab =
          settings.data.dir.empty() ? "" : PreparedPaths{settings.data.dir}.vocab();
      printed_model = app::model_for_printing(o.config, vocab, vocab_known);
      o.config = effective_config(o.config, settings, printed_model, world.size());
      return;
    }
    s = setup(o, settings, world.size());
    o.vocab_fingerprint = app::fingerprint_text(s.vocab.fingerprint());
  });
  if (o.print_config) {
    app::print_config(o.config, vocab_known,
                      app::plan_for_printing(o.config, printed_model, settings.train, o.run_dir,
                                             vocab_known, world, "mtk-wmt"));
    return 0;
  }
  const app::AutoPlan plan =
      app::plan_auto(o.config, s.model, settings.train, o.run_dir, world, "mtk-wmt");
  if (plan.planned()) {
    s.mesh_shape = plan.mesh;
    s.rules = plan.rules;
  }
  agree_on_failure(world, [&] {
    o.resolved_yaml = (plan.planned() ? plan.yaml_comment() : "") +
                      effective_config(o.config, settings, s.model, world.size()).dump();
  });
  set_node_allreduce(settings.train.program.node_allreduce);  // program.node_allreduce
  return -1;
}

// What `mtk-wmt translate` takes on its command line (0 / -1: from the config).
struct TranslateOptions {
  std::string input, out, reference;
  std::int64_t beam = 0, max_length = 0, batch = 0;
  double alpha = -1;
  int examples = 3;
};

void add_translate_options(CLI::App& app, TranslateOptions& t) {
  app.add_option("--input", t.input, "Sentences to translate, one a line (text or newstest .sgm)")
      ->required()
      ->type_name("FILE");
  app.add_option("--out", t.out, "Where the translations go, one a line (default: stdout)")
      ->type_name("FILE");
  cli::deprecated_alias(app, "--output", "--out", t.out);
  app.add_option("--reference", t.reference, "Reference translations: prints BLEU")
      ->type_name("FILE");
  app.add_option("--beam", t.beam, "Beam size; 1 is greedy (translate.beam, else 4)")
      ->type_name("N")
      ->check(cli::integer_in(1, 64));
  app.add_option("--alpha", t.alpha, "Length penalty exponent (translate.alpha, else 0.6)")
      ->type_name("A")
      ->check(cli::non_negative_number());
  app.add_option("--max-length", t.max_length,
                 "Tokens generated at most, EOS included (translate.max_length, else model.length)")
      ->type_name("N")
      ->check(cli::integer_in(1, 1 << 20));
  app.add_option("--batch", t.batch,
                 "Sentences per beam search (translate.batch, else model.batch)")
      ->type_name("N")
      ->check(cli::integer_in(1, 1 << 20));
  app.add_option("--examples", t.examples, "Example translations printed with --reference (3)")
      ->type_name("N")
      ->check(cli::integer_in(0, 1000));
}

// The beam search and decoding shape: the command line, else the config, else the model's.
void decoding_settings(const TranslateOptions& t, const Settings& settings,
                       const nn::TransformerConfig& model, decode::BeamSearchOptions& bo,
                       nn::DecodingShape& shape) {
  const std::int64_t L = model.length;
  const TranslateSettings& c = settings.translate;  // the config's defaults
  bo.beam_size = t.beam > 0 ? t.beam : c.beam;
  bo.alpha = t.alpha >= 0 ? t.alpha : c.alpha;
  bo.max_length = std::min(L, t.max_length > 0   ? t.max_length
                              : c.max_length > 0 ? c.max_length
                                                 : L);
  bo.eos_id = Vocab::kEosId;
  bo.start_id = 0;
  shape.batch = t.batch > 0 ? t.batch : c.batch > 0 ? c.batch : model.batch;
  shape.beam = bo.beam_size;
  shape.source_length = L;
  shape.max_length = bo.max_length;
}

// The sentences of --input and, with --reference, as many references; all ranks agree on failure.
// Streamed, with the training pairs' limit (data.max_line_bytes): a longer line is an error, found
// in bounded memory.
void read_sentences(const Communicator& world, const TranslateOptions& t, std::size_t limit,
                    std::vector<std::string>& sources, std::vector<std::string>& references) {
  agree_on_failure(world, [&] {
    sources = text::read_text_lines(t.input, true, limit, "data.max_line_bytes");
    if (!t.reference.empty()) {
      references = text::read_text_lines(t.reference, false, limit, "data.max_line_bytes");
      if (references.size() != sources.size())
        fail("mtk-wmt translate", cat("--reference '", t.reference, "' has ", references.size(),
                                      " lines but --input '", t.input, "' has ", sources.size()));
    }
  });
}

// The decoder translate runs: step-wise with caches for a dense model; a mixture of experts routes
// by the whole sequence, so its model is re-run on every whole prefix (decode::FullDecoder, as
// `mtk-lm1b sample` does): the same function as training's, slower by about the length.
struct Translator {
  std::unique_ptr<decode::IncrementalDecoder> incremental;
  std::unique_ptr<decode::FullDecoder> full;
  void encode(const std::vector<std::vector<std::int32_t>>& rows) {
    incremental ? incremental->encode(rows) : full->encode(rows);
  }
  std::vector<std::vector<decode::Hypothesis>> beam_search(const decode::BeamSearchOptions& bo) {
    return incremental ? incremental->beam_search(bo) : full->beam_search(bo);
  }
};

// The decoder with the checkpoint's weights (its path and metadata in `path`, `meta`).
Translator load_decoder(const Communicator& world, const app::RunOptions& o, const Setup& s,
                        const nn::DecodingShape& shape, std::string& path,
                        CheckpointMetadata& meta) {
  Mesh mesh(s.mesh_shape, world);
  Graph g(s.program);
  agree_on_failure(world, [&] {
    nn::build_transformer(g, s.model, false);  // the checkpoint's variables, by name
  });
  auto program = lower(g, mesh, s.rules);
  path = app::restore_weights(*program, o, mesh, &meta, true, "mtk-wmt");
  Translator t;
  agree_on_failure(world, [&] {
    app::batch_slice(s.rules, mesh, shape.batch, "the translate batch", "mtk-wmt translate");
    if (s.model.moe_every > 0)
      t.full = std::make_unique<decode::FullDecoder>(s.model, shape, mesh, s.rules, s.program);
    else
      t.incremental =
          std::make_unique<decode::IncrementalDecoder>(s.model, shape, mesh, s.rules, s.program);
  });
  if (t.full) {
    app::say(cat("  model.moe_every = ", s.model.moe_every,
                 ": each position re-runs the model on the whole prefix (a mixture of experts "
                 "routes by the sequence; no step-wise caches)\n"));
    t.full->load_weights(*program);
  } else {
    t.incremental->load_weights(*program);
  }
  return t;  // the training-shaped program is no longer needed
}

// Every piece translated, in batches of pieces sorted by length (so that a batch's beam searches
// end together); the best hypothesis of each, in the pieces' order.
std::vector<std::string> translate_pieces(Translator& decoder, const Vocab& vocab,
                                          const std::vector<std::vector<std::int32_t>>& encoded,
                                          std::int64_t batch, double min_length_ratio,
                                          const decode::BeamSearchOptions& bo,
                                          ProgressLine& progress) {
  std::vector<std::size_t> order(encoded.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return encoded[a].size() < encoded[b].size();
  });
  std::vector<std::string> translations(encoded.size());
  const std::size_t batches =
      (order.size() + static_cast<std::size_t>(batch) - 1) / static_cast<std::size_t>(batch);
  progress.set_total(static_cast<double>(encoded.size()));
  for (std::size_t first = 0; first < order.size(); first += static_cast<std::size_t>(batch)) {
    std::vector<std::vector<std::int32_t>> rows;
    for (std::size_t k = first; k < order.size() && rows.size() < static_cast<std::size_t>(batch);
         ++k)
      rows.push_back(encoded[order[k]]);
    decoder.encode(rows);
    decode::BeamSearchOptions row_options = bo;
    if (min_length_ratio > 0) {  // translate.min_length_ratio: no EOS before a share of the source
      row_options.min_lengths.assign(static_cast<std::size_t>(batch), 0);
      for (std::size_t r = 0; r < rows.size(); ++r)
        row_options.min_lengths[r] = std::min<std::int64_t>(
            bo.max_length - 1,
            static_cast<std::int64_t>(min_length_ratio * static_cast<double>(rows[r].size() - 1)));
    }
    const auto result = decoder.beam_search(row_options);
    for (std::size_t r = 0; r < rows.size(); ++r)
      translations[order[first + r]] =
          result[r].empty() ? std::string() : vocab.decode(result[r][0].tokens);
    // Batches run shortest first, so the rate (and the time left) is a lower bound early on.
    progress.update(static_cast<double>(first + rows.size()),
                    cat("batch ", first / static_cast<std::size_t>(batch) + 1, "/", batches));
  }
  progress.finish(cat(batches, batches == 1 ? " batch" : " batches"));
  return translations;
}

// The sources cut as translate.split says (translate_pieces.hpp), translated and joined again.
std::vector<std::string> translate_sentences(Translator& decoder, const Vocab& vocab,
                                             const std::vector<std::string>& sources,
                                             const TranslateSettings& settings, std::int64_t length,
                                             std::int64_t batch,
                                             const decode::BeamSearchOptions& bo,
                                             ProgressLine& progress) {
  const TranslationPieces pieces =
      split_for_translation(sources, settings.split, vocab, length - 1);
  if (pieces.tokens.size() != sources.size())
    app::say(cat("  ", sources.size(), " lines translated as ", pieces.tokens.size(),
                 " pieces (translate.split)\n"));
  if (pieces.cut > 0)
    app::say(cat("  ", pieces.cut, " pieces cut at model.length - 1 = ", length - 1,
                 " tokens (translate.split: none, or a single word longer)\n"));
  return join_translations(pieces, translate_pieces(decoder, vocab, pieces.tokens, batch,
                                                    settings.min_length_ratio, bo, progress));
}

// Rank 0 writes the translations to --out (atomically) or stdout; all ranks agree on failure.
void write_translations(const Communicator& world, const std::vector<std::string>& translations,
                        const std::string& output) {
  agree_on_failure(world, [&] {
    if (world.rank() != 0)
      return;
    std::string text;
    for (const auto& t : translations)
      text += t + "\n";
    if (output.empty())
      std::fwrite(text.data(), 1, text.size(), stdout);
    else
      write_file_atomically(output, text, "mtk-wmt translate");
  });
}

// Rank 0's report (stderr when the translations take stdout): what was translated from which
// checkpoint, and with --reference the BLEU line and example translations.
void report_translation(const TranslateOptions& t, const std::vector<std::string>& sources,
                        const std::vector<std::string>& references,
                        const std::vector<std::string>& translations, const std::string& path,
                        const CheckpointMetadata& meta, const decode::BeamSearchOptions& bo,
                        double seconds) {
  std::FILE* report = t.out.empty() ? stderr : stdout;
  std::fprintf(report,
               "mtk-wmt translate: %zu sentences from %s (step %lld), beam %lld, alpha %.2f, "
               "in %.1f s\n",
               sources.size(), path.c_str(), static_cast<long long>(meta.step),
               static_cast<long long>(bo.beam_size), bo.alpha, seconds);
  if (!t.reference.empty()) {
    const auto score = text::corpus_bleu(translations, {references}, {});
    std::fprintf(report, "%s\n", score.line().c_str());
    for (int i = 0; i < t.examples && i < static_cast<int>(sources.size()); ++i) {
      const std::size_t k = sources.size() * static_cast<std::size_t>(i) /
                            static_cast<std::size_t>(std::max(1, t.examples));
      std::fprintf(report, "  SRC %s\n  REF %s\n  MT  %s\n", sources[k].c_str(),
                   text::unescape_xml_entities(references[k]).c_str(), translations[k].c_str());
    }
  }
  std::fflush(report);
}

}  // namespace

int train_main(const Communicator& world, const std::vector<std::string>& args) {
  install_stop_signal_handlers();
  CLI::App app{"Trains the encoder-decoder Transformer on data prepared by `mtk-wmt prepare`.",
               "mtk-wmt train"};
  cli::configure(app);
  app::RunOptions o;
  app::add_run_options(app, o, "apps/wmt/configs/*.yaml",
                       "Starts from this checkpoint instead of the run's newest");
  app::add_check_options(app, o,
                         "Checks config, data, rank count and memory, builds the program, prints "
                         "its cost per rank, and exits without training or writing anything");
  app::add_train_options(app, o);
  Settings settings;
  Setup s;
  if (const int status = start(app, o, settings, s, world, args); status >= 0)
    return status;
  Mesh mesh(s.mesh_shape, world);
  Graph g(s.program);
  nn::ModelGraph m;
  Tensor lr, gradient_norm;  // what training logs besides the losses
  auto optimizer = config::make_optimizer(settings.train.optimizer);
  if (settings.train.optimizer.shard)  // train.shard_optimizer (docs/sharded-optimizer.md)
    optimizer->set_sharding({s.rules, s.mesh_shape});
  // A model whose sizes overflow fails alike on every rank: one agreed error, no abort.
  agree_on_failure(mesh.comm(), [&] {
    // train.microbatches: the batch as slices in series, one optimizer step (docs/memory.md).
    nn::TrainingGraph t =
        nn::build_training(g, s.model, static_cast<int>(settings.train.microbatches), *optimizer,
                           settings.train.lr, settings.train.seed);
    m = t.model;
    lr = t.lr;
    gradient_norm = t.gradient_norm;
  });
  app::say(cat("mtk-wmt train: ", s.model.to_string(), "\n"));
  char line[256];
  std::snprintf(line, sizeof line, "  parameters %.2fM (formula %.2fM); mesh %s; layout %s\n",
                nn::count_parameters(g) / 1e6, s.model.analytic_parameter_count() / 1e6,
                s.mesh_shape.to_string().c_str(), s.rules.to_string().c_str());
  app::say(std::string(line));  // as is: a char array would pick the printf form
  app::say_precision("mtk-wmt", s.model, settings.train.optimizer);
  // With the sharded update its slots are stored split: the optimizer's per-tensor rules.
  app::check_cost(g, s.mesh_shape, optimizer->layout_rules(s.rules), mesh, s.model.to_string());
  auto stream = agree_on_failure(mesh.comm(), [&] {
    const app::BatchSlice slice =
        app::batch_slice(s.rules, mesh, s.model.batch, "model.batch", "mtk-wmt train");
    TokenShard src = TokenShard::open(s.data.source("train"));
    TokenShard tgt = TokenShard::open(s.data.target("train"));
    const std::uint64_t fp = s.vocab.fingerprint();
    if (src.info().vocab_fingerprint != fp || tgt.info().vocab_fingerprint != fp)
      fail("mtk-wmt train",
           cat("the source and target token shards and the vocabulary do not belong together "
               "(vocabulary fingerprints: source shard ",
               app::fingerprint_text(src.info().vocab_fingerprint), ", target shard ",
               app::fingerprint_text(tgt.info().vocab_fingerprint), ", ", s.data.vocab(), " ",
               app::fingerprint_text(fp), "); ",
               prepare_again_advice(s.data.source("train"), "mtk-wmt prepare")));
    if (src.info().vocab_size != s.model.vocab_size)
      fail("mtk-wmt train", cat("the token shards were encoded with a vocabulary of ",
                                src.info().vocab_size, " pieces, but model.vocab_size = ",
                                s.model.vocab_size, "; run `mtk-wmt prepare` again"));
    return std::make_shared<PairStream>(src, tgt, s.model.batch, s.model.length, slice.slices,
                                        slice.index, settings.train.seed, settings.data.pack);
  });
  app::say(cat("  data: ", stream->size(), " pairs of at most ", s.model.length, " tokens a side",
               settings.data.pack ? cat(", packed in ", stream->rows_per_epoch(), " rows") : "",
               "; ", stream->batches_per_epoch(), " steps per epoch\n"));
  if (o.dry_run) {
    app::verify_token_shards(mesh.comm(), {s.data.source("train"), s.data.target("train")});
    app::say(cat("mtk-wmt train --dry-run: config, data (every token checksum), ", world.size(),
                 " rank(s) and memory check out; nothing was trained or written\n"));
    return 0;
  }
  auto program = lower(g, mesh, optimizer->layout_rules(s.rules));
  app::TrainingData data;
  data.next = [&] {
    PairBatch b = stream->next();
    return app::TrainingData::Batch{feeds(m, b), b.global_tokens};
  };
  data.save = [&] { return stream->save(); };
  data.restore = [&](const std::string& position) { stream->restore(position); };
  data.epoch = [&] { return stream->epoch(); };
  return app::run_training("mtk-wmt train", *program,
                           {m, lr, gradient_norm, s.model.contraction_precision()}, mesh, o,
                           settings.train, s.rules, data);
}

int translate_main(const Communicator& world, const std::vector<std::string>& args) {
  CLI::App app{
      "Translates a text or .sgm file with batched beam search from a checkpoint; with "
      "--reference prints BLEU (sacreBLEU's line) and example translations.",
      "mtk-wmt translate"};
  cli::configure(app);
  app::RunOptions o;
  app::add_run_options(app, o, "apps/wmt/configs/*.yaml",
                       "The checkpoint to use instead of the run's newest");
  TranslateOptions t;
  add_translate_options(app, t);
  Settings settings;
  Setup s;
  if (const int status = start(app, o, settings, s, world, args); status >= 0)
    return status;
  decode::BeamSearchOptions bo;
  nn::DecodingShape shape;
  decoding_settings(t, settings, s.model, bo, shape);
  std::vector<std::string> sources, references;
  read_sentences(world, t, static_cast<std::size_t>(settings.data.max_line_bytes), sources,
                 references);
  // Fewer sentences than a batch: a smaller program (rows still divide over the mesh dim that
  // splits `batch`). Rows are decoded independently, unless MoE routing groups span rows.
  if (s.model.moe_every == 0 || s.model.moe.group_size == 0) {
    const int axis = s.rules.mesh_axis_for("batch", s.mesh_shape);
    const std::int64_t split = axis < 0 ? 1 : s.mesh_shape[axis].size;
    const auto needed = static_cast<std::int64_t>(std::max<std::size_t>(sources.size(), 1));
    shape.batch = std::min(shape.batch, (needed + split - 1) / split * split);
  }
  // Progress goes where the report goes: stderr when the translations take stdout.
  ProgressLineOptions po;
  po.enabled = world.rank() == 0;
  po.out = t.out.empty() ? stderr : stdout;
  const auto phase = [&](const std::string& text) {
    if (po.enabled) {
      std::fprintf(po.out, "mtk-wmt translate: %s\n", text.c_str());
      std::fflush(po.out);
    }
  };
  phase(cat(sources.size(), " sentences from ", t.input, "; loading the checkpoint"));
  std::string path;
  CheckpointMetadata meta;
  const auto load_time = std::chrono::steady_clock::now();
  Translator decoder = load_decoder(world, o, s, shape, path, meta);
  char took[32];
  std::snprintf(
      took, sizeof took, "%.1f s",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_time).count());
  phase(cat("loaded ", path, " (step ", meta.step, ") in ", took, "; translating in batches of ",
            shape.batch, ", beam ", bo.beam_size));
  const auto start_time = std::chrono::steady_clock::now();
  // The total is the pieces' count (translate.split), set when they are known.
  ProgressLine progress("mtk-wmt translate", static_cast<double>(sources.size()), "sentences", po);
  const std::vector<std::string> translations = translate_sentences(
      decoder, s.vocab, sources, settings.translate, s.model.length, shape.batch, bo, progress);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  write_translations(world, translations, t.out);
  if (world.rank() == 0)
    report_translation(t, sources, references, translations, path, meta, bo, seconds);
  return 0;
}

}  // namespace mtk::wmt
