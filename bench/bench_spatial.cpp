// Weak scaling of a stack of 3x3x3 convolutions on a volume split in blocks over a 1-D, 2-D or 3-D
// mesh (docs/spatial.md): every rank holds a block of `block`^3 positions whatever the mesh, the
// blocks dims `db`, `hb`, `wb` are split over mesh dims named `d`, `h`, `w` where the mesh has
// them. One training step (forward and the filters' gradients) is timed, the best of `rounds`
// rounds of `steps` steps; one more profiled step gives the time per step kind and the share of
// the halo exchanges. One JSON object per run.
//   mpiexec -n 8 bench_spatial --mesh "d:2;h:2;w:2" [--block 16] [--channels 8] [--layers 2]

#include <mtk/app/app_main.hpp>
#include <mtk/autodiff/gradients.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/ops.hpp>

#include "cli.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

struct Settings {
  std::string mesh = "d:1";
  std::int64_t block = 16, channels = 8;
  int layers = 2, steps = 2, rounds = 3;
};

// The graph: `layers` convolutions with relu, the loss and the filters' gradients.
std::vector<mtk::Tensor> build(mtk::Graph& g, const mtk::MeshShape& mesh, const Settings& s,
                               mtk::Tensor& x) {
  std::vector<mtk::Dimension> dims;
  std::vector<mtk::nn::SpatialDim> spatial;
  for (const char* d : {"d", "h", "w"}) {
    const std::string name(d);
    const int i = mesh.index_of(name);
    const std::int64_t blocks = i >= 0 ? mesh[i].size : 1;
    dims.push_back({name + "b", blocks});
    dims.push_back({name, s.block});
    spatial.push_back({name, "k" + name, 1, 1, name + "b", 0});
  }
  dims.push_back({"c0", s.channels});
  x = mtk::placeholder(g, "x", mtk::Shape(dims));
  mtk::Tensor y = x;
  std::vector<mtk::Tensor> filters;
  for (int l = 0; l < s.layers; ++l) {
    const std::string in = l % 2 ? "c1" : "c0", out = l % 2 ? "c0" : "c1";
    filters.push_back(
        mtk::variable(g, "conv" + std::to_string(l),
                      {{"kd", 3}, {"kh", 3}, {"kw", 3}, {in, s.channels}, {out, s.channels}},
                      mtk::Initializer::normal(0.1f)));
    y = mtk::relu(mtk::nn::conv(y, filters.back(), spatial, in, out));
  }
  mtk::Tensor loss = mtk::reduce_mean(mtk::square(y));
  std::vector<mtk::Tensor> fetch = mtk::gradients(loss, filters);
  fetch.insert(fetch.begin(), loss);
  return fetch;
}

int run(const mtk::Communicator& world, const std::vector<std::string>& args) {
  Settings s;
  CLI::App app{"Weak scaling of a 3x3x3 convolution stack on a volume split over the mesh",
               "bench_spatial"};
  mtk::cli::configure(app);
  app.add_option("--mesh", s.mesh, "Mesh with dims among d, h, w (default d:1)");
  app.add_option("--block", s.block, "Positions per rank along each spatial dim (default 16)")
      ->check(mtk::cli::integer_in(3, 1024));
  app.add_option("--channels", s.channels, "Channels (default 8)")
      ->check(mtk::cli::integer_in(1, 4096));
  app.add_option("--layers", s.layers, "Convolutions (default 2)")
      ->check(mtk::cli::integer_in(1, 100));
  app.add_option("--steps", s.steps, "Steps per round (default 2)")
      ->check(mtk::cli::integer_in(1, 1000));
  app.add_option("--rounds", s.rounds, "Rounds (default 3)")->check(mtk::cli::integer_in(1, 100));
  if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  const mtk::MeshShape mshape = mtk::MeshShape::parse(s.mesh);
  mtk::Graph g;
  mtk::Tensor x;
  const std::vector<mtk::Tensor> fetch = build(g, mshape, s, x);
  std::string rules;
  for (const char* d : {"d", "h", "w"})
    if (mshape.index_of(d) >= 0)
      rules += std::string(rules.empty() ? "" : ";") + d + "b:" + d;
  mtk::Mesh mesh(mshape, world);
  auto program = mtk::lower(g, mesh, mtk::LayoutRules::parse(rules));
  std::vector<float> values(static_cast<size_t>(x.shape().num_elements()));
  for (size_t k = 0; k < values.size(); ++k)
    values[k] = static_cast<float>((k * 7919) % 1000) / 1000.0f - 0.5f;
  const std::map<int, mtk::HostTensor> feeds{{x.id(), mtk::HostTensor::floats(x.shape(), values)}};
  program->run(feeds, fetch);  // warm-up
  std::vector<double> rounds;
  for (int r = 0; r < s.rounds; ++r) {
    world.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < s.steps; ++i)
      program->run(feeds, fetch);
    world.barrier();
    rounds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                     s.steps);
  }
  program->set_profiling(true);
  program->reset_time_split();
  program->run(feeds, fetch);
  nlohmann::ordered_json profile = nlohmann::ordered_json::object();
  double total = 0, halo = 0;
  for (const auto& [kind, sec] : program->time_by_kind()) {
    profile[kind] = sec;
    total += sec;
    if (kind.rfind("halo_", 0) == 0)
      halo += sec;
  }
  const double halo_share = world.max(total > 0 ? halo / total : 0.0);
  if (world.rank() == 0) {
    nlohmann::ordered_json j;
    j["bench"] = "spatial_conv3d";
    j["ranks"] = world.size();
    j["mesh"] = s.mesh;
    j["layout"] = rules;
    j["block"] = s.block;
    j["global_shape"] = x.shape().to_string();
    j["channels"] = s.channels;
    j["layers"] = s.layers;
    j["best_step_s"] = *std::min_element(rounds.begin(), rounds.end());
    j["rounds_s"] = rounds;
    j["profile_s"] = profile;
    j["halo_share_max_over_ranks"] = halo_share;
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {"bench_spatial", /*every_rank_reports=*/true}, run);
}
