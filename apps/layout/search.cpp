// mtk-layout search: which mesh and layout to run a model on N processors with M bytes each, and
// how fast it will be (docs/layout-search.md).
//   mtk-layout search --config apps/lm1b/configs/paper_lm_5.yaml --processors 512
//       --memory 16GiB --machine layouts/machines/gpu-node.yaml --top 10

#include <mtk/app/exit_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/config/training_config.hpp>
#include <mtk/cost/layout_search.hpp>
#include <mtk/cost/memory_plans.hpp>
#include <mtk/data/vocab.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>

#include "cli.hpp"
#include "layout_commands.hpp"
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace mtk::layout_app {

namespace {

std::int64_t parse_bytes(const std::string& text) {
  return config::parse_byte_size(text, "mtk-layout search", "--memory");
}

// The command line of `mtk-layout search`.
struct SearchArgs {
  std::string config_path, preset, machine_file, optimizer, memory_text, dims_text;
  std::vector<std::string> sets;
  cost::SearchOptions options;
  bool json = false;
  int top = 10;
};

void add_search_options(CLI::App& app, SearchArgs& a) {
  cost::SearchOptions& options = a.options;
  app.add_option("--config", a.config_path, "A YAML config (its model section)")->type_name("FILE");
  app.add_option("--model", a.preset, "A preset: paper_lm:-1..5 or paper_translation:-1..4")
      ->type_name("PRESET");
  app.add_option("--processors", options.processors, "Number of processors (MPI ranks)")
      ->required()
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--memory", a.memory_text,
                 "Memory per processor: bytes, or with K, M, G, T (powers of 1000) or KiB, MiB, "
                 "GiB, TiB (default: the machine file's)")
      ->type_name("BYTES");
  app.add_option("--machine", a.machine_file, "A machine file (layouts/machines/*.yaml)")
      ->type_name("FILE");
  app.add_option("--top", a.top, "How many meshes and layouts to list")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--dims", a.dims_text, "Only these model dims may be split, e.g. batch,heads,d_ff")
      ->type_name("a,b,...");
  app.add_option("--max-mesh-dims", options.max_mesh_dims, "Mesh dimensions at most")
      ->check(CLI::Range(1, 4));
  app.add_option("--optimizer", a.optimizer, "adafactor | adam | sgd (default: the config's)")
      ->check(CLI::IsMember(config::optimizer_names()));
  app.add_flag("--bf16", options.time.bf16, "Time matmuls at the machine's bf16 rate");
  app.add_option("--set", a.sets, "Overrides one setting (repeatable), e.g. model.d_model=512")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all();
  app.add_flag("--json", a.json, "Print the result as JSON");
}

// --json: one object per line for the `shown` best candidates of `plan`.
void print_json(const cost::MemoryPlan& plan, size_t shown) {
  const cost::SearchResult& r = plan.result;
  for (size_t i = 0; i < shown; ++i) {
    const cost::Candidate& c = r.ranked[i];
    nlohmann::ordered_json j;
    j["rank"] = i + 1;
    j["mesh"] = c.mesh.to_string();
    j["layout"] = c.rules.to_string();
    j["recompute"] = nn::to_string(plan.settings.recompute);
    j["microbatches"] = plan.settings.microbatches;
    j["loss_chunks"] = plan.settings.loss_chunks;
    j["peak_bytes"] = c.counters.peak_bytes;
    j["flops"] = c.counters.total_flops();
    j["comm_bytes"] = c.counters.total_comm_bytes();
    j["compute_s"] = c.time.compute_s;
    j["matmul_s"] = c.time.matmul_s;
    j["elementwise_s"] = c.time.elementwise_s;
    j["overhead_s"] = c.time.overhead_s;
    j["kernel_steps"] = c.time.kernel_steps;
    j["comm_s"] = c.time.comm_total_s;
    j["step_s"] = c.time.total_s;
    j["overlapped_s"] = c.time.overlapped_s;
    j["mfu"] = c.mfu;
    std::printf("%s\n", j.dump().c_str());
  }
}

// What was searched and how much of it was dropped, and why.
void print_searched(const cost::SearchResult& r, double seconds) {
  std::string dims;
  for (const auto& d : r.dims)
    dims += (dims.empty() ? "" : ",") + d;
  std::string whole;
  for (const auto& d : r.unsplittable)
    whole += (whole.empty() ? "; kept whole: " : ", ") + d;
  std::printf(
      "searched: splittable dims %s%s; %lld meshes up to order, %lld mappings: %lld not "
      "divisible, %lld with two dims of one tensor on one mesh dim, %lld analysed, %lld over the "
      "memory limit; %zu (mesh order, layout) candidates in %.2f s\n\n",
      dims.c_str(), whole.c_str(), static_cast<long long>(r.meshes),
      static_cast<long long>(r.mappings), static_cast<long long>(r.not_divisible),
      static_cast<long long>(r.tensor_conflicts), static_cast<long long>(r.analyzed),
      static_cast<long long>(r.over_memory), r.ranked.size(), seconds);
}

// The table of the `shown` best candidates and the best one's options (`extra`: the memory
// settings to add, when they differ from the config's).
void print_ranking(const cost::SearchResult& r, size_t shown, const std::string& extra) {
  std::printf("%4s  %-28s %-44s %11s %10s %11s %10s %10s %10s %6s\n", "#", "mesh", "layout",
              "peak mem", "FLOPs", "comm", "compute s", "comm s", "step s", "MFU");
  for (size_t i = 0; i < shown; ++i) {
    const cost::Candidate& c = r.ranked[i];
    std::printf("%4zu  %-28s %-44s %11s %10.3g %11s %10.4g %10.4g %10.4g %5.1f%%\n", i + 1,
                c.mesh.to_string().c_str(), c.rules.to_string().c_str(),
                mtk::format_bytes(static_cast<double>(c.counters.peak_bytes)).c_str(),
                c.counters.total_flops(),
                mtk::format_bytes(static_cast<double>(c.counters.total_comm_bytes())).c_str(),
                c.time.compute_s, c.time.comm_total_s, c.time.total_s, 100 * c.mfu);
  }
  const cost::Candidate& best = r.ranked.front();
  std::printf("\nbest: --mesh \"%s\" --layout \"%s\"%s%s\n", best.mesh.to_string().c_str(),
              best.rules.to_string().c_str(), extra.empty() ? "" : " ", extra.c_str());
  std::printf("      predicted %.4g s per step (%.4g s if collectives overlapped compute)\n",
              best.time.total_s, best.time.overlapped_s);
}

// When the configured settings fit nothing: each recompute / loss chunks / microbatch setting that
// fits, with its best layout, fastest first.
void print_plans(const cost::MemoryPlanSearch& search, std::int64_t limit) {
  const cost::MemorySettings& configured = search.configured.settings;
  std::printf(
      "no layout fits %s per processor with model.recompute=%s, model.loss_chunks=%lld, "
      "train.microbatches=%lld (smallest peak %s); with recomputation, loss chunks or "
      "microbatches:\n\n",
      mtk::format_bytes(static_cast<double>(limit)).c_str(), nn::to_string(configured.recompute),
      static_cast<long long>(configured.loss_chunks),
      static_cast<long long>(configured.microbatches),
      mtk::format_bytes(static_cast<double>(search.configured.result.min_peak_bytes)).c_str());
  std::printf("%4s  %-10s %6s %6s  %-28s %-44s %11s %10s %10s\n", "#", "recompute", "chunks",
              "micro", "mesh", "layout", "peak mem", "FLOPs", "step s");
  for (size_t i = 0; i < search.plans.size(); ++i) {
    const cost::MemoryPlan& p = search.plans[i];
    const cost::Candidate& c = p.result.ranked.front();
    std::printf("%4zu  %-10s %6lld %6lld  %-28s %-44s %11s %10.3g %10.4g\n", i + 1,
                nn::to_string(p.settings.recompute), static_cast<long long>(p.settings.loss_chunks),
                static_cast<long long>(p.settings.microbatches), c.mesh.to_string().c_str(),
                c.rules.to_string().c_str(),
                mtk::format_bytes(static_cast<double>(c.counters.peak_bytes)).c_str(),
                c.counters.total_flops(), c.time.total_s);
  }
  std::printf("\nthe best plan's layouts:\n");
}

// model.vocab_size as the training apps size it: when the config does not set it and names a
// data directory (data.dir), the size of that directory's prepared vocabulary (DIR/vocab.model,
// as mtk-lm1b and mtk-wmt prepare it), which `config` gets; else the preset's or the default.
// Returns the line that says which size was used and why ("" when model.vocab_size was given).
std::string size_vocabulary(Config& config) {
  if (config.has("model.vocab_size"))
    return "";
  const std::string dir = config.get_string("data.dir", "", {});
  const int assumed = transformer_config_from(config).vocab_size;
  if (dir.empty())
    return cat("vocabulary: ", assumed,
               " pieces assumed (the preset's or the default; the config names no data.dir and "
               "no model.vocab_size)");
  const std::string path = dir + "/vocab.model";
  try {
    const int size = Vocab::load(path).size();
    config.set("model.vocab_size", std::to_string(size));
    return cat("vocabulary: ", size, " pieces, from data.dir's ", path,
               " (as the training apps size the model)");
  } catch (const std::exception& e) {
    return cat("vocabulary: ", assumed,
               " pieces assumed (the preset's or the default): data.dir's ", path,
               " is not readable here (", e.what(),
               "); set model.vocab_size or run from "
               "where data.dir is");
  }
}

}  // namespace

int run_search(const Communicator& world, const std::vector<std::string>& args) {
  SearchArgs a;
  cost::SearchOptions& options = a.options;
  options.processors = 0;
  CLI::App app{
      "Which mesh and layout to run a model on N processors with: enumerates meshes that\n"
      "factor N and the model's layouts, drops those over the memory limit and ranks the\n"
      "rest by predicted step time (docs/layout-search.md).",
      "mtk-layout search"};
  cli::configure(app);
  add_search_options(app, a);
  if (const int status = cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  Config config =
      a.config_path.empty() ? Config::from_string("{}") : Config::from_file(a.config_path);
  if (!a.preset.empty())
    a.sets.insert(a.sets.begin(), "model.preset=" + a.preset);
  const bool memory_given = !a.memory_text.empty();
  if (memory_given)
    options.memory_bytes = parse_bytes(a.memory_text);
  {
    std::stringstream s(a.dims_text);
    for (std::string d; std::getline(s, d, ',');)
      if (!d.empty())
        options.dims.push_back(d);
  }
  for (const auto& s : a.sets)
    config.apply_override(s);
  const std::string vocab_note = size_vocabulary(config);
  if (!a.optimizer.empty())
    config.apply_override("train.optimizer=" + a.optimizer);
  // The config's optimizer with its hyperparameters (Adafactor's factoring sizes its slots).
  const config::TrainingSettings training = config::read_training_settings(config);
  const config::OptimizerSettings optimizer_settings = training.optimizer;
  // The config's program.* settings: lowered with them, exchanges priced as they will run.
  options.program = training.program;
  options.time.overlap_halo = training.program.overlap_halo;
  const cost::Machine machine =
      a.machine_file.empty() ? cost::reference_machine() : machine_from_file(a.machine_file);
  if (!memory_given)
    options.memory_bytes = machine.memory_bytes;

  const auto t0 = std::chrono::steady_clock::now();
  const nn::TransformerConfig model = transformer_config_from(config);
  const cost::MemorySettings configured{model.recompute, training.microbatches, model.loss_chunks};
  const cost::MemoryPlanSearch search = cost::search_with_memory_settings(
      model, configured, [&] { return config::make_optimizer(optimizer_settings); }, machine,
      options);
  const bool planned = !search.plans.empty();
  const cost::MemoryPlan& chosen = planned ? search.plans.front() : search.configured;
  const cost::SearchResult& r = chosen.result;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const size_t shown = std::min(r.ranked.size(), static_cast<size_t>(a.top));
  if (a.json) {
    if (!vocab_note.empty())
      std::fprintf(stderr, "mtk-layout search: %s\n", vocab_note.c_str());
    print_json(chosen, shown);
    return kExitOk;
  }
  std::printf("model: %s\n", model.to_string().c_str());
  if (!vocab_note.empty())
    std::printf("%s\n", vocab_note.c_str());
  std::printf("machine: %s; %d processors; memory limit %s per processor; optimizer %s%s\n",
              machine.name.c_str(), options.processors,
              options.memory_bytes > 0
                  ? mtk::format_bytes(static_cast<double>(options.memory_bytes)).c_str()
                  : "none",
              optimizer_settings.name.c_str(), options.time.bf16 ? "; bf16 matmuls" : "");
  print_searched(search.configured.result, seconds);
  if (planned)
    print_plans(search, options.memory_bytes);
  print_ranking(r, shown, planned ? chosen.settings.to_args() : std::string());
  return kExitOk;
}

}  // namespace mtk::layout_app
