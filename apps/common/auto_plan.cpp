#include "auto_plan.hpp"

#include <mtk/app/memory_budget.hpp>
#include <mtk/base/error.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/cost/memory_plans.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/optim/optim.hpp>
#include <mtk/signals/stop_signals.hpp>

#include <Kokkos_Core.hpp>

#include "say.hpp"
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <tuple>
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

nn::Recompute recompute_named(const std::string& name) {
  for (const auto& [n, value] : nn::recompute_names())
    if (n == name)
      return value;
  return nn::Recompute::norms;
}

// What one rank's share of the search found, as text lines (every rank gathers every share's):
// "fit" and the best plan's fields (step time exact), or "none" and the smallest peak with its
// setting and the setting's index (-1: the configured one); then the counts.
std::string share_text(const cost::MemoryPlanSearch& found, const cost::MemorySettings& configured,
                       const nn::TransformerConfig& model) {
  std::ostringstream out;
  const bool fits = !found.configured.result.ranked.empty();
  if (fits || !found.plans.empty()) {
    const cost::MemoryPlan& chosen = fits ? found.configured : found.plans.front();
    const cost::Candidate& best = chosen.result.ranked.front();
    char step[64];
    std::snprintf(step, sizeof step, "%.17g", best.time.total_s);
    out << "fit\n"
        << step << "\n"
        << nn::to_string(chosen.settings.recompute) << "\n"
        << chosen.settings.microbatches << "\n"
        << chosen.settings.loss_chunks << "\n"
        << best.mesh.to_string() << "\n"
        << best.rules.to_string() << "\n"
        << best.counters.peak_bytes << "\n"
        << chosen.result.ranked.size() << "\n";
  } else {
    const std::vector<cost::MemorySettings> all = cost::memory_settings_to_try(model, configured);
    long index = -1;
    for (size_t i = 0; i < all.size(); ++i)
      if (!(found.smallest_at == configured) && all[i] == found.smallest_at)
        index = static_cast<long>(i);
    out << "none\n"
        << found.smallest_peak << "\n"
        << nn::to_string(found.smallest_at.recompute) << "\n"
        << found.smallest_at.microbatches << "\n"
        << found.smallest_at.loss_chunks << "\n"
        << index << "\n";
  }
  out << found.analyzed << "\n" << found.bounded << "\n";
  return out.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// Rank 0's progress line of the planning, every 2 s at most (silent elsewhere).
std::function<void(const cost::SearchProgress&)> progress_printer(const AutoPlan& p,
                                                                  const Communicator& comm,
                                                                  bool speaks) {
  const auto t0 = std::chrono::steady_clock::now();
  return [&p, &comm, speaks, t0, last = t0](const cost::SearchProgress& pr) mutable {
    const auto now = std::chrono::steady_clock::now();
    if (!speaks || std::chrono::duration<double>(now - last).count() < 2.0)
      return;
    last = now;
    std::string settings;
    if (pr.settings > 0) {
      const std::int64_t share = (pr.settings + comm.size() - 1) / comm.size();  // rank 0's
      settings = cat(pr.settings_done, " of ",
                     comm.size() > 1 ? cat("rank 0's ", share, " (", pr.settings, " over ",
                                           comm.size(), " ranks)")
                                     : cat(pr.settings),
                     " settings of model.recompute, model.loss_chunks and train.microbatches ",
                     "searched, ", pr.settings_fitting, " fit; ");
    }
    say(cat("  planning (", p.auto_text(), ", ", comm.size(), " ranks, ",
            format_duration(std::chrono::duration<double>(now - t0).count()), "): ", settings,
            pr.analyzed, " layouts lowered, ", pr.bounded,
            " left out by a lower bound of their memory\n"));
  };
}

// The search, its settings shared out over the ranks (each rank searches the configured setting,
// and when nothing fits it, its share of the other settings): the fastest (mesh, layout) that
// fits, with recomputation, loss chunks and microbatches when nothing fits as configured. Every
// rank gathers every share and chooses alike: the plan of the fastest share (ties as
// cost::sort_plans breaks them), which is the single search's. A stop signal (polled before each
// lowering) stops every rank; progress is printed on rank 0 every few seconds.
void search(AutoPlan& p, const Config& config, const nn::TransformerConfig& model,
            const config::TrainingSettings& train, const cost::Machine& machine,
            const Communicator& comm, const std::string& tool, bool announce) {
  cost::SearchOptions options;
  options.processors = comm.size();
  options.memory_bytes = p.memory_bytes;
  options.time.bf16 = model.contraction_precision() == Precision::bfloat16;
  // Lowered with the run's program.* settings; halo exchanges priced as the run will run them.
  options.program = train.program;
  options.time.overlap_halo = train.program.overlap_halo;
  if (!p.mesh_auto)
    options.mesh = config.mesh_shape();
  if (!p.layout_auto)
    options.rules = config.layout_rules();
  options.stop = [] { return stop_signal_received(); };
  options.progress = progress_printer(p, comm, announce && comm.rank() == 0);
  const config::OptimizerSettings optimizer = train.optimizer;
  const cost::MemorySettings configured{model.recompute, train.microbatches, model.loss_chunks};
  const auto make_optimizer = [&] { return config::make_optimizer(optimizer); };
  auto no_plan = [&](const std::string& why) {
    fail(tool, cat("mesh: auto / layout: auto found no plan for the model (", model.to_string(),
                   ") on ", comm.size(), " ranks with a memory limit of ",
                   bytes_text(p.memory_bytes), " per rank (", p.memory_source, "): ", why));
  };
  std::string local;
  cost::SearchResult configured_result;  // identical on every rank
  int stopped = 0;
  agree_on_failure(comm, [&] {
    try {
      const cost::MemoryPlanSearch found = cost::search_memory_settings_share(
          model, configured, make_optimizer, machine, options, comm.rank(), comm.size());
      configured_result = found.configured.result;
      local = share_text(found, configured, model);
    } catch (const cost::SearchStopped&) {
      stopped = 1;
    } catch (const Error& e) {
      no_plan(e.what());
    }
  });
  if (comm.max(stopped))
    throw StopRequested(comm.max(stop_signal_number()));
  // Every share, in rank order: the fastest plan, else the smallest peak.
  bool fits = false;
  std::tuple<double, int, std::int64_t, std::int64_t> best_key{};
  std::pair<std::int64_t, long> smallest{std::numeric_limits<std::int64_t>::max(), 0};
  std::vector<std::string> best, smallest_fields;
  std::int64_t analyzed = 0, bounded = 0;
  for (const std::string& share : comm.allgather(local)) {
    const std::vector<std::string> f = lines_of(share);
    analyzed += std::stoll(f.at(f.size() - 2));
    bounded += std::stoll(f.at(f.size() - 1));
    if (f.at(0) == "fit") {
      const auto key =
          std::make_tuple(std::stod(f.at(1)), static_cast<int>(recompute_named(f.at(2))),
                          std::stoll(f.at(3)), std::stoll(f.at(4)));
      if (!fits || key < best_key) {
        fits = true;
        best_key = key;
        best = f;
      }
    } else {
      const std::pair<std::int64_t, long> key{std::stoll(f.at(1)), std::stol(f.at(5))};
      if (key < smallest) {
        smallest = key;
        smallest_fields = f;
      }
    }
  }
  p.lowered = analyzed;
  p.bounded = bounded;
  if (!fits) {
    agree_on_failure(comm, [&] {
      const cost::MemorySettings at{recompute_named(smallest_fields.at(2)),
                                    std::stoll(smallest_fields.at(3)),
                                    std::stoll(smallest_fields.at(4))};
      try {
        cost::fail_no_setting_fits(model, configured_result, options, smallest.first, at);
      } catch (const Error& e) {
        no_plan(e.what());
      }
    });
  }
  p.step_s = std::stod(best.at(1));
  p.recompute = recompute_named(best.at(2));
  p.microbatches = std::stoll(best.at(3));
  p.loss_chunks = std::stoll(best.at(4));
  p.mesh = MeshShape::parse(best.at(5));
  p.rules = LayoutRules::parse(best.at(6));
  p.peak_bytes = std::stoll(best.at(7));
  p.candidates = std::stoll(best.at(8));
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
                "machine %s; %lld candidates fit (%lld layouts lowered, %lld left out by a lower "
                "bound of their memory)\n",
                auto_text().c_str(), mesh.num_processors(), seconds, mesh.to_string().c_str(),
                layout_text.c_str(), nn::to_string(recompute), static_cast<long long>(loss_chunks),
                static_cast<long long>(microbatches), step_s, bytes_text(peak_bytes).c_str(),
                bytes_text(memory_bytes).c_str(), memory_source.c_str(), machine.c_str(),
                static_cast<long long>(candidates), static_cast<long long>(lowered),
                static_cast<long long>(bounded));
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
  search(p, config, model, train, machine, comm, tool, announce);
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
