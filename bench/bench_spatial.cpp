// Weak scaling of a stack of 3x3x3 convolutions on a volume split in blocks over a 1-D, 2-D or 3-D
// mesh (docs/spatial.md): every rank holds a block of `block`^3 positions whatever the mesh, the
// blocks dims `db`, `hb`, `wb` are split over mesh dims named `d`, `h`, `w` where the mesh has
// them. One training step (forward and the filters' gradients) is timed, the best of `rounds`
// rounds of `steps` steps; `rounds` more profiled rounds give the time per step kind and the split
// halo exchanges' time (local copies along unsplit dims apart, halo_copy; medians over the
// rounds). With `--overlap both` (the default) the same is run with the halo exchanges blocking
// (program.overlap_halo false) and overlapped (true), the two programs' rounds interleaved: the
// exchange time, the time hidden and the hidden fraction, next to the cost model's predicted halo
// share (hidden per exchange behind the products between its start and its finish). One JSON object
// per run.
// `--layer transpose` makes each layer a transposed convolution, `--layer pool` a convolution
// followed by a max pooling of 3 along d (stride 1; a 3-D window would take the patches past the
// einsum's 8 dims), so their interior splits can be timed too.
// `--blocks-per-rank 2` gives each rank 2^3 blocks: on one rank the layers are split all the
// same, their exchanges local copies, so the split's extra work is timed without other ranks.
//   mpiexec -n 8 bench_spatial --mesh "d:2;h:2;w:2" [--block 16] [--channels 8] [--layers 2]
//                             [--layer conv|transpose|pool] [--overlap both|on|off]
//                             [--blocks-per-rank 1] [--machine FILE]

#include <mtk/app/app_main.hpp>
#include <mtk/autodiff/gradients.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/cost/step_time.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/nn/conv.hpp>
#include <mtk/ops/ops.hpp>

#include "cli.hpp"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

struct Settings {
  std::string mesh = "d:1";
  std::string layer = "conv";  // conv, transpose or pool
  std::int64_t block = 16, channels = 8;
  std::int64_t blocks_per_rank = 1;  // along each spatial dim
  int layers = 2, steps = 2, rounds = 3;
};

// The graph: `layers` layers (each a convolution, a transposed convolution, or a convolution and
// a max pooling along d) with relu, the loss and the filters' gradients.
std::vector<mtk::Tensor> build(mtk::Graph& g, const mtk::MeshShape& mesh, const Settings& s,
                               mtk::Tensor& x) {
  std::vector<mtk::Dimension> dims;
  std::vector<mtk::nn::SpatialDim> spatial;
  for (const char* d : {"d", "h", "w"}) {
    const std::string name(d);
    const int i = mesh.index_of(name);
    const std::int64_t blocks = (i >= 0 ? mesh[i].size : 1) * s.blocks_per_rank;
    dims.push_back({name + "b", blocks});
    dims.push_back({name, s.block});
    spatial.push_back({name, "k" + name, 1, 1, name + "b", 0});
  }
  const std::vector<mtk::nn::SpatialDim> window{{"d", "pd", 1, 1, "db", 3}};
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
    if (s.layer == "transpose")  // y holds the filter's `in` channels: its output channels here
      y = mtk::relu(mtk::nn::conv_transpose(y, filters.back(), spatial, out, in));
    else
      y = mtk::relu(mtk::nn::conv(y, filters.back(), spatial, in, out));
    if (s.layer == "pool")
      y = mtk::nn::max_pool(y, window, mtk::nn::Padding::same);
  }
  mtk::Tensor loss = mtk::reduce_mean(mtk::square(y));
  std::vector<mtk::Tensor> fetch = mtk::gradients(loss, filters);
  fetch.insert(fetch.begin(), loss);
  return fetch;
}

// One mode's figures; the times are the slowest rank's (per step kind in profile_s).
struct Measured {
  double best_step_s = 0;
  std::vector<double> rounds_s;
  nlohmann::ordered_json profile_s;
  // The split exchanges' steps (start, finish: OpTraits::halo), the local copies along unsplit
  // dims (halo_copy), the whole step; per step, the median over the profiled rounds.
  double halo_s = 0, copy_s = 0, profiled_s = 0;
  // The exchange's steps on the rank with the most time outside them: it never waits in them for
  // another rank's compute, so this is the exchange's own cost (halo_s, the most over the ranks,
  // also holds a faster rank's wait for a slower one).
  double halo_slowest_rank_s = 0, profiled_slowest_rank_s = 0;
  int overlapped_halos = 0;
  mtk::cost::StepTime predicted;
};

std::string layout_rules(const mtk::MeshShape& mshape) {
  std::string rules;
  for (const char* d : {"d", "h", "w"})
    if (mshape.index_of(d) >= 0)
      rules += std::string(rules.empty() ? "" : ";") + d + "b:" + d;
  return rules;
}

// One mode's program, built and lowered with program.overlap_halo as `overlap` says.
struct Mode {
  bool overlap = false;
  mtk::Graph g;
  std::unique_ptr<mtk::Program> program;
  std::vector<mtk::Tensor> fetch;
  std::map<int, mtk::HostTensor> feeds;
  Measured m;
  // Per profiled round, per step: halo, copies, whole; on the slowest rank: halo, whole.
  std::vector<double> halo, copy, total, halo_slowest, total_slowest;
  std::map<std::string, double> by_kind;  // summed over the profiled rounds, most over the ranks
};

void build_mode(Mode& md, const mtk::Mesh& mesh, const Settings& s) {
  mtk::ProgramOptions options;
  options.overlap_halo = md.overlap;  // read by nn::conv and by lower()
  md.g.set_options(options);
  mtk::Tensor x;
  md.fetch = build(md.g, mesh.shape(), s, x);
  md.program = mtk::lower(md.g, mesh, mtk::LayoutRules::parse(layout_rules(mesh.shape())));
  std::vector<float> values(static_cast<size_t>(x.shape().num_elements()));
  for (size_t k = 0; k < values.size(); ++k)
    values[k] = static_cast<float>((k * 7919) % 1000) / 1000.0f - 0.5f;
  md.feeds = {{x.id(), mtk::HostTensor::floats(x.shape(), values)}};
  md.program->run(md.feeds, md.fetch);  // warm-up
}

void timed_round(Mode& md, const mtk::Communicator& world, const Settings& s) {
  world.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < s.steps; ++i)
    md.program->run(md.feeds, md.fetch);
  world.barrier();
  md.m.rounds_s.push_back(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / s.steps);
}

void profiled_round(Mode& md, const mtk::Communicator& world, const Settings& s) {
  mtk::Program& p = *md.program;
  p.set_profiling(true);
  p.reset_time_split();
  for (int i = 0; i < s.steps; ++i)
    p.run(md.feeds, md.fetch);
  p.set_profiling(false);
  double total = 0, halo = 0, copy = 0;
  for (const auto& [kind, sec] : p.time_by_kind()) {  // every rank has the same kinds
    md.by_kind[kind] += world.max(sec) / s.steps;
    total += sec;
    if (kind == "halo_copy")
      copy += sec;
    else if (kind.rfind("halo_", 0) == 0)
      halo += sec;
  }
  md.halo.push_back(world.max(halo) / s.steps);
  md.copy.push_back(world.max(copy) / s.steps);
  md.total.push_back(world.max(total) / s.steps);
  const std::vector<double> others = world.allgather(total - halo);
  const auto slowest =
      static_cast<int>(std::max_element(others.begin(), others.end()) - others.begin());
  double mine[2] = {halo, total};
  world.broadcast_in_place(mine, 2, slowest);
  md.halo_slowest.push_back(mine[0] / s.steps);
  md.total_slowest.push_back(mine[1] / s.steps);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Every mode's rounds interleaved (blocking, overlapped, blocking, ...), so that a slow spell of
// the host falls on both modes alike; then as many profiled rounds, interleaved the same way, whose
// medians are the figures.
void measure(std::vector<Mode*> modes, const mtk::Communicator& world, const mtk::Mesh& mesh,
             const Settings& s, const mtk::cost::Machine& machine) {
  for (Mode* md : modes)
    build_mode(*md, mesh, s);
  for (int r = 0; r < s.rounds; ++r)
    for (Mode* md : modes)
      timed_round(*md, world, s);
  for (int r = 0; r < s.rounds; ++r)
    for (Mode* md : modes)
      profiled_round(*md, world, s);
  for (Mode* md : modes) {
    Measured& m = md->m;
    m.best_step_s = *std::min_element(m.rounds_s.begin(), m.rounds_s.end());
    m.profile_s = nlohmann::ordered_json::object();
    for (const auto& [kind, sec] : md->by_kind)
      m.profile_s[kind] = sec / s.rounds;
    m.halo_s = median(md->halo);
    m.copy_s = median(md->copy);
    m.profiled_s = median(md->total);
    m.halo_slowest_rank_s = median(md->halo_slowest);
    m.profiled_slowest_rank_s = median(md->total_slowest);
    m.overlapped_halos = md->program->overlapped_halos();
    mtk::cost::StepTimeOptions o;
    o.overlap_halo = md->overlap;
    m.predicted = mtk::cost::predict_step_time(md->program->counters(), mesh.shape(), machine, o);
  }
}

nlohmann::ordered_json to_json(const Measured& m) {
  nlohmann::ordered_json j;
  j["best_step_s"] = m.best_step_s;
  j["rounds_s"] = m.rounds_s;
  j["halo_s"] = m.halo_s;
  j["halo_share"] = m.profiled_s > 0 ? m.halo_s / m.profiled_s : 0.0;
  j["halo_copy_s"] = m.copy_s;
  j["halo_slowest_rank_s"] = m.halo_slowest_rank_s;
  j["halo_share_slowest_rank"] =
      m.profiled_slowest_rank_s > 0 ? m.halo_slowest_rank_s / m.profiled_slowest_rank_s : 0.0;
  j["overlapped_halos"] = m.overlapped_halos;
  const auto& p = m.predicted;
  const auto halo = p.comm_s.find(mtk::Collective::halo);
  // Per split exchange (Counters::halo_exchanges): the products between its start and finish.
  double between = 0;
  int hidden = 0, exposed = 0;
  auto shares = nlohmann::ordered_json::array();  // per exchange, in step order: hidden / halo
  for (const auto& e : p.halo_exchanges) {
    between += e.between_s;
    hidden += e.exposed_s == 0 && e.halo_s > 0;
    exposed += e.hidden_s == 0 && e.halo_s > 0;
    shares.push_back(e.halo_s > 0 ? std::round(e.hidden_s / e.halo_s * 1000) / 1000 : 0.0);
  }
  j["predicted"] = {{"step_s", p.total_s},
                    {"matmul_s", p.matmul_s},
                    {"elementwise_s", p.elementwise_s},
                    {"overhead_s", p.overhead_s},
                    {"halo_s", halo == p.comm_s.end() ? 0.0 : halo->second},
                    {"halo_hidden_s", p.halo_hidden_s},
                    {"halo_exposed_s", p.halo_exposed_s},
                    {"halo_share", p.total_s > 0 ? p.halo_exposed_s / p.total_s : 0.0},
                    {"halo_steps_s", p.halo_steps_s},
                    {"halo_steps_share", p.total_s > 0 ? p.halo_steps_s / p.total_s : 0.0},
                    {"bound", p.halo_whole_step_bound ? "whole step" : "per exchange"},
                    {"exchanges", p.halo_exchanges.size()},
                    {"exchanges_fully_hidden", hidden},
                    {"exchanges_fully_exposed", exposed},
                    {"products_between_s", between},
                    {"hidden_share_per_exchange", shares},
                    {"by_kind_s", mtk::cost::by_name(p.kind_s)}};
  j["profile_s"] = m.profile_s;
  return j;
}

int run(const mtk::Communicator& world, const std::vector<std::string>& args) {
  Settings s;
  std::string overlap = "both", machine_file;
  CLI::App app{"Weak scaling of a 3x3x3 convolution stack on a volume split over the mesh",
               "bench_spatial"};
  mtk::cli::configure(app);
  app.add_option("--mesh", s.mesh, "Mesh with dims among d, h, w (default d:1)");
  app.add_option("--block", s.block, "Positions per rank along each spatial dim (default 16)")
      ->check(mtk::cli::integer_in(3, 1024));
  app.add_option("--blocks-per-rank", s.blocks_per_rank,
                 "Blocks of `block`^3 per rank along each spatial dim (default 1; more split the "
                 "layers into interior and border on one rank too: their extra work alone)")
      ->check(mtk::cli::integer_in(1, 16));
  app.add_option("--channels", s.channels, "Channels (default 8)")
      ->check(mtk::cli::integer_in(1, 4096));
  app.add_option("--layers", s.layers, "Layers (default 2)")->check(mtk::cli::integer_in(1, 100));
  app.add_option("--layer", s.layer,
                 "Each layer: conv (default), transpose (a transposed convolution) or pool (a "
                 "convolution and a max pooling of 3 along d)")
      ->check(CLI::IsMember({"conv", "transpose", "pool"}));
  app.add_option("--steps", s.steps, "Steps per round (default 2)")
      ->check(mtk::cli::integer_in(1, 1000));
  app.add_option("--rounds", s.rounds, "Rounds (default 3)")->check(mtk::cli::integer_in(1, 100));
  app.add_option("--overlap", overlap, "Halo exchanges: both (default), on, off")
      ->check(CLI::IsMember({"both", "on", "off"}));
  app.add_option("--machine", machine_file,
                 "Machine file for the predicted times (default: the reference machine)");
  if (const int status = mtk::cli::parse(app, args, world.rank() == 0); status >= 0)
    return status;
  const mtk::MeshShape mshape = mtk::MeshShape::parse(s.mesh);
  const mtk::cost::Machine machine =
      machine_file.empty() ? mtk::cost::reference_machine() : mtk::machine_from_file(machine_file);
  mtk::Mesh mesh(mshape, world);
  nlohmann::ordered_json j;
  j["bench"] = "spatial_conv3d";
  j["ranks"] = world.size();
  j["mesh"] = s.mesh;
  j["layout"] = layout_rules(mshape);
  j["block"] = s.block;
  j["blocks_per_rank"] = s.blocks_per_rank;
  j["channels"] = s.channels;
  j["layers"] = s.layers;
  j["layer"] = s.layer;
  j["machine"] = machine_file.empty() ? "reference" : machine_file;
  Mode off, on;
  on.overlap = true;
  std::vector<Mode*> modes;
  if (overlap != "on")
    modes.push_back(&off);
  if (overlap != "off")
    modes.push_back(&on);
  measure(modes, world, mesh, s, machine);
  if (overlap != "on")
    j["blocking"] = to_json(off.m);
  if (overlap != "off")
    j["overlapped"] = to_json(on.m);
  if (overlap == "both") {
    // The exchange's time blocking, what of it the overlapped run still waits for, the rest hidden
    // (medians of the profiled rounds); on the slowest rank too, where no wait for another rank's
    // compute is in it.
    const Measured &a = off.m, &b = on.m;
    const double hidden = a.halo_s - b.halo_s;
    j["exchange_s"] = a.halo_s;
    j["exposed_s"] = b.halo_s;
    j["hidden_s"] = hidden;
    j["hidden_fraction"] = a.halo_s > 0 ? hidden / a.halo_s : 0.0;
    j["hidden_fraction_slowest_rank"] =
        a.halo_slowest_rank_s > 0
            ? (a.halo_slowest_rank_s - b.halo_slowest_rank_s) / a.halo_slowest_rank_s
            : 0.0;
    j["step_saved_s"] = a.best_step_s - b.best_step_s;
  }
  if (world.rank() == 0)
    std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {"bench_spatial", /*every_rank_reports=*/true}, run);
}
