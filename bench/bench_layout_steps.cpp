// Measured step time of one model under many meshes and layouts, for validating the layout
// search (bench/run-layout-search-bench). Every layout is lowered once; then `rounds` rounds run
// `steps` steps of each layout in turn (alternating, so machine noise spreads over all of them)
// and the best round counts. One JSON object per layout.
//   mpiexec -n 2 bench_layout_steps --config bench/layout-search/dense.yaml
//       --layouts FILE (lines "MESH|LAYOUT") [--steps 2] [--rounds 3]

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/config/config.hpp>
#include <mtk/config/model_config.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>

#include "cli.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

struct Case {
  std::string mesh, layout;
  mtk::Graph graph;
  mtk::nn::ModelGraph model;
  std::unique_ptr<mtk::Program> program;
  std::vector<double> rounds;  // seconds per step, one per round
};

int run(const mtk::Communicator& world, const std::vector<std::string>& args) {
  std::string config_file, layouts_file;
  int steps = 2, rounds = 3, profile = 0;
  CLI::App app{
      "Measured step time of one model under many meshes and layouts (the best of "
      "`rounds` rounds of `steps` steps each); one JSON object per layout.",
      "bench_layout_steps"};
  mtk::cli::configure(app);
  app.add_option("--config", config_file, "The model's YAML config")->required()->type_name("FILE");
  app.add_option("--layouts", layouts_file, "Lines \"MESH|LAYOUT\", one per layout")
      ->required()
      ->type_name("FILE");
  app.add_option("--steps", steps, "Steps per round (default 2)")
      ->check(mtk::cli::integer_in(1, 1000000));
  app.add_option("--rounds", rounds, "Rounds (default 3)")->check(mtk::cli::integer_in(1, 1000));
  app.add_option("--profile", profile, "1: one more profiled step per layout (default 0)")
      ->check(mtk::cli::integer_in(0, 1));
  if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  const mtk::Config config = mtk::Config::from_file(config_file);
  const mtk::nn::TransformerConfig c = mtk::transformer_config_from(config);
  std::deque<Case> cases;
  std::ifstream in(layouts_file);
  for (std::string line; std::getline(in, line);) {
    const auto bar = line.find('|');
    if (bar == std::string::npos)
      continue;
    cases.emplace_back();
    cases.back().mesh = line.substr(0, bar);
    cases.back().layout = line.substr(bar + 1);
  }
  const mtk::Shape s{{"batch", c.batch}, {"length", c.length}};
  std::mt19937 rng(0);
  std::vector<std::int32_t> tokens, targets, seg(static_cast<size_t>(c.batch * c.length), 1), pos;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      tokens.push_back(static_cast<std::int32_t>(1 + rng() % (c.vocab_size - 1)));
      targets.push_back(static_cast<std::int32_t>(1 + rng() % (c.vocab_size - 1)));
      pos.push_back(static_cast<std::int32_t>(l));
    }
  auto feeds = [&](const mtk::nn::ModelGraph& m) {
    return std::map<int, mtk::HostTensor>{{m.inputs.id(), mtk::HostTensor::ints(s, tokens)},
                                          {m.targets.id(), mtk::HostTensor::ints(s, targets)},
                                          {m.segments.id(), mtk::HostTensor::ints(s, seg)},
                                          {m.positions.id(), mtk::HostTensor::ints(s, pos)}};
  };
  for (Case& k : cases) {
    k.model = mtk::nn::build_transformer(k.graph, c, true);
    mtk::optim::Adafactor opt;
    mtk::optim::minimize(k.model.loss, opt, mtk::optim::LearningRateSchedule());
    mtk::Mesh mesh(mtk::MeshShape::parse(k.mesh), world);
    k.program = mtk::lower(k.graph, mesh, mtk::LayoutRules::parse(k.layout));
    k.program->run(feeds(k.model), {k.model.loss});  // warm-up
  }
  for (int r = 0; r < rounds; ++r)
    for (Case& k : cases) {
      const auto f = feeds(k.model);
      world.barrier();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < steps; ++i)
        k.program->run(f, {k.model.loss});
      world.barrier();
      k.rounds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps);
    }
  std::vector<nlohmann::ordered_json> profiles(cases.size(), nlohmann::ordered_json::object());
  if (profile)  // one more step of each, timed per step kind (fenced: slower than the rounds)
    for (size_t i = 0; i < cases.size(); ++i) {
      Case& k = cases[i];
      k.program->set_profiling(true);
      k.program->reset_time_split();
      k.program->run(feeds(k.model), {k.model.loss});
      k.program->set_profiling(false);
      for (const auto& [kind, sec] : k.program->time_by_kind())
        profiles[i][kind] = sec;
    }
  if (world.rank() == 0)
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& k = cases[i];
      nlohmann::ordered_json j;
      j["bench"] = "layout_steps";
      j["config"] = config_file;
      j["ranks"] = world.size();
      j["mesh"] = k.mesh;
      j["layout"] = k.layout;
      j["best_step_s"] = *std::min_element(k.rounds.begin(), k.rounds.end());
      j["rounds_s"] = k.rounds;
      j["profile_s"] = profiles[i];
      std::printf("%s\n", j.dump().c_str());
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {"bench_layout_steps", /*every_rank_reports=*/true}, run);
}
