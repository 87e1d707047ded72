#include "auto_plan.hpp"

#include <mtk/app/memory_budget.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/cost/memory_plans.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/optim/optim.hpp>

#include <Kokkos_Core.hpp>

#include "say.hpp"
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <type_traits>
#include <vector>

namespace mtk::app {

namespace {

std::string bytes_text(std::int64_t bytes) {
  return bytes > 0 ? format_bytes(static_cast<double>(bytes)) : std::string("none");
}

// The machine description: train.machine, else RUN_DIR/machine.yaml, else the reference machine.
cost::Machine planning_machine(const config::TrainingSettings& train, const std::string& run_dir,
                               std::string& described) {
  std::string path = train.machine;
  if (path.empty() && std::filesystem::exists(run_dir + "/machine.yaml"))
    path = run_dir + "/machine.yaml";
  if (path.empty()) {
    cost::Machine m = cost::reference_machine();
    described = m.name;
    return m;
  }
  cost::Machine m = machine_from_file(path);
  described = cat(m.name, " (", path, ")");
  return m;
}

// The plan's fields as text, rank 0's search to every rank.
std::vector<std::string> to_fields(const AutoPlan& p) {
  char step[64];
  std::snprintf(step, sizeof step, "%.17g", p.step_s);
  return {p.mesh.to_string(),  p.rules.to_string(), nn::to_string(p.recompute),
          cat(p.microbatches), cat(p.loss_chunks),  step,
          cat(p.peak_bytes),   cat(p.candidates),   p.machine};
}

void from_fields(const std::vector<std::string>& f, AutoPlan& p) {
  p.mesh = MeshShape::parse(f.at(0));
  p.rules = LayoutRules::parse(f.at(1));
  for (const auto& [name, value] : nn::recompute_names())
    if (name == f.at(2))
      p.recompute = value;
  p.microbatches = std::stoll(f.at(3));
  p.loss_chunks = std::stoll(f.at(4));
  p.step_s = std::stod(f.at(5));
  p.peak_bytes = std::stoll(f.at(6));
  p.candidates = std::stoll(f.at(7));
  p.machine = f.at(8);
}

// Rank 0's search: the fastest (mesh, layout) that fits, with recomputation, loss chunks and
// microbatches when nothing fits as configured.
void search(AutoPlan& p, const Config& config, const nn::TransformerConfig& model,
            const config::TrainingSettings& train, const cost::Machine& machine, int ranks) {
  cost::SearchOptions options;
  options.processors = ranks;
  options.memory_bytes = p.memory_bytes;
  options.time.bf16 = model.contraction_precision() == Precision::bfloat16;
  // The run overlaps its halo exchanges when MTK_OVERLAP_HALO=1: price them as it will run them.
  options.time.overlap_halo = runtime_options().overlap_halo();
  if (!p.mesh_auto)
    options.mesh = config.mesh_shape();
  if (!p.layout_auto)
    options.rules = config.layout_rules();
  const config::OptimizerSettings optimizer = train.optimizer;
  const cost::MemorySettings configured{model.recompute, train.microbatches, model.loss_chunks};
  const cost::MemoryPlanSearch found = cost::search_with_memory_settings(
      model, configured, [&] { return config::make_optimizer(optimizer); }, machine, options);
  const cost::MemoryPlan& chosen = found.plans.empty() ? found.configured : found.plans.front();
  const cost::Candidate& best = chosen.result.ranked.front();
  p.mesh = best.mesh;
  p.rules = best.rules;
  p.recompute = chosen.settings.recompute;
  p.microbatches = chosen.settings.microbatches;
  p.loss_chunks = chosen.settings.loss_chunks;
  p.step_s = best.time.total_s;
  p.peak_bytes = best.counters.peak_bytes;
  p.candidates = static_cast<std::int64_t>(chosen.result.ranked.size());
}

}  // namespace

std::string AutoPlan::auto_text() const {
  return mesh_auto && layout_auto ? "mesh: auto, layout: auto"
         : mesh_auto              ? "mesh: auto"
                                  : "layout: auto";
}

std::string AutoPlan::describe() const {
  const std::string layout_text =
      rules.rules().empty() ? std::string("(none: nothing split)") : rules.to_string();
  char line[1024];
  std::snprintf(line, sizeof line,
                "  plan (%s, %d ranks, %.2f s): mesh %s; layout %s; model.recompute %s; "
                "model.loss_chunks %lld; train.microbatches %lld\n"
                "  plan: predicted %.4g s per step, peak %s per rank of a limit of %s (%s); "
                "machine %s; %lld candidates fit\n",
                auto_text().c_str(), mesh.num_processors(), seconds, mesh.to_string().c_str(),
                layout_text.c_str(), nn::to_string(recompute), static_cast<long long>(loss_chunks),
                static_cast<long long>(microbatches), step_s, bytes_text(peak_bytes).c_str(),
                bytes_text(memory_bytes).c_str(), memory_source.c_str(), machine.c_str(),
                static_cast<long long>(candidates));
  return line;
}

std::string AutoPlan::yaml_fields() const {
  std::string out =
      cat("#   ranks: ", mesh.num_processors(), "\n#   mesh: \"", mesh.to_string(),
          "\"\n#   layout: \"", rules.to_string(), "\"\n#   recompute: ", nn::to_string(recompute),
          "\n#   loss_chunks: ", loss_chunks, "\n#   microbatches: ", microbatches, "\n");
  char figures[512];
  std::snprintf(figures, sizeof figures,
                "#   predicted_step_s: %.6g\n#   predicted_peak_bytes: %lld\n"
                "#   memory_limit_bytes: %lld (%s)\n#   machine: %s\n#   planning_s: %.3f\n",
                step_s, static_cast<long long>(peak_bytes), static_cast<long long>(memory_bytes),
                memory_source.c_str(), machine.c_str(), seconds);
  return out + figures;
}

std::string AutoPlan::yaml_comment() const {
  return cat("# planned at start-up (docs/memory.md#mesh-auto), from the config's ",
             mesh_auto && layout_auto ? "mesh: auto and layout: auto" : auto_text(), ":\n",
             yaml_fields());
}

bool is_auto(const Config& config, const std::string& key) {
  if (!config.has(key))
    return false;
  try {
    return config.get_string(key) == "auto";
  } catch (const Error&) {  // a map: a mesh or layout written out
    return false;
  }
}

std::int64_t planning_memory(const config::TrainingSettings& train, std::int64_t machine_bytes,
                             const Communicator& comm, std::string& source) {
  if (!train.memory_per_rank.empty()) {
    source = "train.memory_per_rank";
    return config::parse_byte_size(train.memory_per_rank, "mtk::app::planning_memory",
                                   "train.memory_per_rank");
  }
  if (machine_bytes > 0) {
    source = "the machine file's memory_bytes";
    return machine_bytes;
  }
  // On a GPU the peak is device memory, which the host's figures do not tell.
  constexpr bool host =
      std::is_same_v<Kokkos::DefaultExecutionSpace::memory_space, Kokkos::HostSpace>;
  const std::int64_t per_rank = host ? host_memory_budget(comm).per_rank() : -1;
  const std::int64_t least = comm.min(per_rank < 0 ? std::int64_t{-1} : per_rank);
  if (least <= 0) {
    source = "unknown: no limit";
    return 0;
  }
  source = "the node's available memory / its ranks, least over the nodes";
  return least;
}

AutoPlan plan_auto(Config& config, nn::TransformerConfig& model, config::TrainingSettings& train,
                   const std::string& run_dir, const Communicator& comm, const std::string& tool,
                   bool announce) {
  AutoPlan p;
  p.mesh_auto = is_auto(config, "mesh");
  p.layout_auto = is_auto(config, "layout");
  if (!p.planned())
    return p;
  const auto t0 = std::chrono::steady_clock::now();
  const cost::Machine machine =
      agree_on_failure(comm, [&] { return planning_machine(train, run_dir, p.machine); });
  p.memory_bytes = planning_memory(train, machine.memory_bytes, comm, p.memory_source);
  std::vector<std::string> fields;
  agree_on_failure(comm, [&] {
    if (comm.rank() != 0)
      return;
    try {
      search(p, config, model, train, machine, comm.size());
    } catch (const Error& e) {
      fail(tool, cat("mesh: auto / layout: auto found no plan for the model (", model.to_string(),
                     ") on ", comm.size(), " ranks with a memory limit of ",
                     bytes_text(p.memory_bytes), " per rank (", p.memory_source, "): ", e.what()));
    }
    fields = to_fields(p);
  });
  from_fields(comm.broadcast(fields, 0), p);
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  config.set("mesh", "\"" + p.mesh.to_string() + "\"");
  config.set("layout", "\"" + p.rules.to_string() + "\"");
  config.set("model.recompute", nn::to_string(p.recompute));
  config.set("train.microbatches", cat(p.microbatches));
  config.set("model.loss_chunks", cat(p.loss_chunks));
  model.recompute = p.recompute;
  model.loss_chunks = p.loss_chunks;
  train.microbatches = p.microbatches;
  if (announce)
    say(p.describe());
  return p;
}

std::string plan_for_printing(const Config& config, nn::TransformerConfig model,
                              config::TrainingSettings train, const std::string& run_dir,
                              bool vocab_known, const Communicator& comm, const std::string& tool) {
  AutoPlan what;
  what.mesh_auto = is_auto(config, "mesh");
  what.layout_auto = is_auto(config, "layout");
  if (!what.planned())
    return "";
  if (!vocab_known)
    return cat("# --print-config: the plan (", what.auto_text(),
               ") is chosen at start-up for the ranks given; it needs model.vocab_size, the size "
               "of data.dir's vocabulary (not readable yet)\n");
  // A deep copy: Config copies share their YAML document, which plan_auto() writes the plan into.
  Config planned = Config::from_string(config.dump(), config.origin());
  try {
    const AutoPlan p = plan_auto(planned, model, train, run_dir, comm, tool, false);
    return cat("# --print-config: on these ", comm.size(),
               " ranks start-up would plan (docs/memory.md#mesh-auto; another number of ranks "
               "plans again):\n",
               p.yaml_fields());
  } catch (const AgreedError& e) {  // every rank failed alike: shown, not fatal, here
    std::string out = "# --print-config: no plan on these ranks:\n";
    std::istringstream lines(e.what());
    for (std::string line; std::getline(lines, line);)
      out += "#   " + line + "\n";
    return out;
  }
}

}  // namespace mtk::app
