// mtk-layout: what a model costs on a mesh under a layout — parameters, per-processor memory,
// FLOPs and communication per training step — computed by lowering the real training graph for
// one processor without allocating anything. Runs on one rank for any mesh size.
//   mtk-layout --model paper_lm:5 --mesh "batch:16;model:32"
//              --layout "batch:batch;vocab:model;d_ff:model;heads:model"
//   mtk-layout --config apps/lm1b/configs/demo.yaml [--explain]

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/config/program_config.hpp>
#include <mtk/cost/internode.hpp>
#include <mtk/cost/step_time.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/metrics/metrics.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>

#include "cli.hpp"
#include "layout_check.hpp"
#include "layout_commands.hpp"
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

std::unique_ptr<mtk::optim::Optimizer> make_optimizer(const std::string& name) {
  if (name == "adam")
    return std::make_unique<mtk::optim::Adam>();
  if (name == "sgd")
    return std::make_unique<mtk::optim::Sgd>();
  if (name != "adafactor")
    mtk::fail("mtk-layout", "unknown optimizer '" + name + "'");
  return std::make_unique<mtk::optim::Adafactor>();
}

// The memory traffic the step-time model charges, largest kinds first.
void print_kernel_steps(const mtk::Counters& c) {
  std::vector<std::pair<std::int64_t, std::string>> kinds;
  std::int64_t total = 0, steps = 0;
  for (const auto& [k, v] : c.op_bytes)
    if (!k.traits().free) {
      kinds.emplace_back(v, k.name());
      total += v;
      steps += c.op_calls.count(k) ? c.op_calls.at(k) : 0;
    }
  std::sort(kinds.rbegin(), kinds.rend());
  std::printf("  kernel steps: %lld, reading and writing %s", static_cast<long long>(steps),
              mtk::format_bytes(static_cast<double>(total)).c_str());
  for (size_t i = 0; i < kinds.size() && i < 4; ++i)
    std::printf("%s%s %s", i == 0 ? " (" : ", ", kinds[i].second.c_str(),
                mtk::format_bytes(static_cast<double>(kinds[i].first)).c_str());
  std::printf("%s\n", kinds.empty() ? "" : ", ...)");
}

// With --ranks-per-node: what a step sends between nodes (mtk/cost/internode.hpp).
void print_internode(const mtk::Counters& c, const mtk::MeshShape& mesh, int per_node) {
  if (per_node <= 0)
    return;
  const auto v = mtk::cost::internode_volume(c, mesh, per_node);
  std::printf(
      "  between nodes (%d ranks per node, %d nodes): %.0f bytes per step in all, %.0f "
      "out of the busiest node",
      per_node, v.nodes, v.total_bytes, v.busiest_node_bytes);
  for (const auto& [k, b] : v.by_kind)
    std::printf("; %s %.0f", mtk::to_string(k), b);
  std::printf("\n");
}

int run(const mtk::Communicator& world, const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "search")
    return mtk::layout_app::run_search(world, {args.begin() + 1, args.end()});
  if (!args.empty() && args[0] == "calibrate")
    return mtk::layout_app::run_calibrate(world, {args.begin() + 1, args.end()});
  if (args.size() == 1 && args[0] == "runtime-options") {  // docs/runtime-options.md's tables
    std::printf("%s", mtk::runtime_options_markdown().c_str());
    return 0;
  }
  std::string config_path, preset, mesh_text, layout_text, optimizer = "adafactor";
  std::vector<std::string> sets;
  bool explain = false, strict_layout = false;
  int ranks_per_node = 0;
  CLI::App app{
      "What a model costs on a mesh under a layout: parameters, memory, FLOPs and\n"
      "communication per processor and training step, from the real training graph\n"
      "lowered for one processor without allocating anything. Runs on one rank.",
      "mtk-layout"};
  mtk::cli::configure(app);
  app.add_option("--config", config_path, "A YAML config (its model, mesh and layout sections)")
      ->type_name("FILE");
  app.add_option("--model", preset, "A preset: paper_lm:-1..5 or paper_translation:-1..4")
      ->type_name("PRESET");
  app.add_option("--mesh", mesh_text, "The mesh, e.g. \"batch:16;model:32\"")->type_name("M");
  app.add_option("--layout", layout_text, "The layout, e.g. \"batch:batch;d_ff:model\"")
      ->type_name("L");
  app.add_option("--set", sets, "Overrides one setting (repeatable), e.g. model.d_model=512")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--optimizer", optimizer, "adafactor | adam | sgd (adafactor)")
      ->type_name("NAME")
      ->check(CLI::IsMember({"adafactor", "adam", "sgd"}));
  app.add_option("--ranks-per-node", ranks_per_node,
                 "Also prints the bytes a step sends between nodes")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  app.add_flag("--explain", explain, "Also prints every variable's layout and every collective");
  mtk::app::add_strict_layout_flag(app, strict_layout);
  if (const int status = mtk::cli::parse(app, args, true); status >= 0)
    return status;
  mtk::Config config =
      config_path.empty() ? mtk::Config::from_string("{}") : mtk::Config::from_file(config_path);
  if (!preset.empty())
    sets.insert(sets.begin(), "model.preset=" + preset);
  for (const auto& s : sets)
    config.apply_override(s);
  if (!mesh_text.empty())
    config.set("mesh", "\"" + mesh_text + "\"");
  if (!layout_text.empty())
    config.set("layout", "\"" + layout_text + "\"");
  const mtk::nn::TransformerConfig model = mtk::transformer_config_from(config);
  const mtk::MeshShape mesh =
      config.has("mesh") ? config.mesh_shape() : mtk::MeshShape::parse("all:1");
  const mtk::LayoutRules rules = config.layout_rules();

  // Lowered as the run config's program.* settings would lower it.
  mtk::Graph g(mtk::config::program_schema().read(config, "program"));
  mtk::nn::ModelGraph m = mtk::nn::build_transformer(g, model, true);
  mtk::app::check_layout_rules(g, rules, mtk::app::transformer_dim_names, strict_layout,
                               "mtk-layout");
  const std::int64_t params = mtk::nn::count_parameters(g);
  std::unique_ptr<mtk::optim::Optimizer> opt = make_optimizer(optimizer);
  const bool sharded = config.get_bool("train.shard_optimizer", false);
  if (sharded)  // the slots' per-tensor rules split them (docs/sharded-optimizer.md)
    opt->set_sharding({rules, mesh});
  mtk::optim::minimize(m.loss, *opt, mtk::optim::LearningRateSchedule());
  auto program = mtk::analyze(g, mesh, opt->layout_rules(rules));
  const auto& c = program->counters();
  std::printf("model: %s\n", model.to_string().c_str());
  std::printf("parameters: %lld (%.2fB; formula %lld)\n", static_cast<long long>(params),
              params / 1e9, static_cast<long long>(model.analytic_parameter_count()));
  std::printf("mesh: %s (%d processors); layout: %s\n", mesh.to_string().c_str(),
              mesh.num_processors(), rules.to_string().c_str());
  std::printf("per processor, one training step with %s%s:\n", optimizer.c_str(),
              sharded ? " (sharded update, train.shard_optimizer)" : "");
  std::printf("  memory: variables and optimizer slots %s, peak %s\n",
              mtk::format_bytes(static_cast<double>(c.variable_bytes)).c_str(),
              mtk::format_bytes(static_cast<double>(c.peak_bytes)).c_str());
  std::printf("  compute: %.3g FLOPs (%.3g in einsums)\n", c.total_flops(),
              c.flops_of(mtk::FlopClass::einsum));
  print_kernel_steps(c);
  std::printf("  communication: %s",
              mtk::format_bytes(static_cast<double>(c.total_comm_bytes())).c_str());
  for (const auto& [k, v] : c.comm_bytes)
    std::printf("; %s %s in %lld calls", mtk::to_string(k),
                mtk::format_bytes(static_cast<double>(v)).c_str(),
                static_cast<long long>(c.comm_calls.at(k)));
  std::printf("\n");
  print_internode(c, mesh, ranks_per_node);
  if (explain)
    std::printf("\n%s", program->explain().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // An analysis builds and drops step lists and planner tables of tens of MB; glibc would map each
  // one afresh, every page a fault (a sixth of a 256-layer analysis on a VM). Kept in the heap,
  // they reuse pages already touched: 62k -> 50k faults, 1.7-2.0 -> 1.5 s.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  return mtk::app_main(argc, argv, {"mtk-layout", /*every_rank_reports=*/true}, run);
}
