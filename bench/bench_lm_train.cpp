// Training throughput of the standard benchmark model (shared/bench/README.md) on any mesh and
// layout, with the step time split into compute, collectives and other, and the peak memory per
// rank (predicted by analyze(), Kokkos allocations measured, the process's VmHWM). One JSON object.
//   mpiexec -n 2 bench_lm_train --mesh batch:2 --layout batch:batch --steps 3 [--bf16]
// --bf16: model.activation_dtype bfloat16 (every contraction in bf16 with fp32 sums).
// --recompute none|norms|attention|layer, --microbatches k: model.recompute, train.microbatches
// (docs/memory.md; bench/run-memory-bench). --loss-chunks c: model.loss_chunks.
// --steps 0: no step runs; prints analyze()'s prediction only (peak, variables, FLOPs).
// --variable-dtype, --slot-dtype float32|bfloat16: train.variable_dtype,
// train.optimizer_slot_dtype. --variable-rounding nearest|stochastic: train.variable_rounding.
// --shard-optimizer: the sharded optimizer update
// (docs/sharded-optimizer.md). --window W: model.attention_window (local attention; `length` may
// then be split: --mesh seq:2 --layout length:seq, docs/spatial.md). --program KEY=VALUE
// (repeatable): program.KEY of the run config (overlap, buffers, bf16 copies, in-place updates).

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/base/kokkos_bytes.hpp>
#include <mtk/config/program_config.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/matmul_ceiling.hpp>
#include <mtk/lower/lowering.hpp>
#include <mtk/metrics/peak_memory.hpp>
#include <mtk/nn/training_graph.hpp>
#include <mtk/nn/transformer.hpp>
#include <mtk/optim/optim.hpp>
#include <mtk/parallel/node_reducer.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

long long max_over_ranks(long long v) {
  long long m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

// Compute and collective seconds per step of the rank with the most compute, and the most compute
// over the least. That rank never waits for another's compute, so its collective time is what the
// step exposes of communication; the others' also holds their wait for it (unequal cores).
struct SlowestRank {
  double compute = 0, collectives = 0, imbalance = 1;
};
SlowestRank slowest_rank(double compute, double collectives) {
  int ranks = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<double> all(2 * static_cast<size_t>(ranks));
  const double mine[2] = {compute, collectives};
  MPI_Allgather(mine, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, MPI_COMM_WORLD);
  SlowestRank s{all[0], all[1], 1};
  double least = all[0];
  for (int r = 1; r < ranks; ++r) {
    const double c = all[2 * static_cast<size_t>(r)];
    least = std::min(least, c);
    if (c > s.compute)
      s = {c, all[2 * static_cast<size_t>(r) + 1], 1};
  }
  s.imbalance = least > 0 ? s.compute / least : 1;
  return s;
}

// Every matmul backend on n^3 (2048 on the host, 8192 on a GPU), all ranks at once (each rank's
// share of the machine), summed over the ranks: the ceiling of the whole machine per backend
// (kernels/matmul_ceiling.hpp).
std::vector<mtk::kernels::MatmulRate> machine_matmul_rates() {
  MPI_Barrier(MPI_COMM_WORLD);
  auto rates =
      mtk::kernels::measure_matmul_rates(mtk::ExecSpace(), mtk::kernels::matmul_ceiling_size(), 3);
  for (auto& r : rates) {
    double sum = 0;
    MPI_Allreduce(&r.gflops, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    r.gflops = sum;
  }
  return rates;
}

mtk::nn::Recompute recompute_of(const std::string& v) {
  for (const auto& [name, value] : mtk::nn::recompute_names())
    if (name == v)
      return value;
  mtk::fail("bench_lm_train", "--recompute " + v + ": not none, norms, attention or layer");
}

// --steps 0: analyze()'s figures of the lowered program, nothing run.
void print_prediction(const mtk::Program& p, const mtk::nn::TransformerConfig& c, int microbatches,
                      const std::string& mesh, const std::string& layout) {
  const auto& n = p.counters();
  std::printf(
      "{\"bench\":\"lm_train\",\"dry_run\":true,\"mesh\":\"%s\",\"layout\":\"%s\","
      "\"recompute\":\"%s\",\"microbatches\":%d,\"loss_chunks\":%lld,"
      "\"peak_bytes\":%lld,\"live_peak_bytes\":%lld,\"pool_bytes\":%lld,"
      "\"variable_bytes\":%lld,\"program_flops_per_step\":%.0f,"
      "\"recomputed_steps\":%lld}\n",
      mesh.c_str(), layout.c_str(), mtk::nn::to_string(c.recompute), microbatches,
      static_cast<long long>(c.loss_chunks), static_cast<long long>(n.peak_bytes),
      static_cast<long long>(n.live_peak_bytes), static_cast<long long>(n.pool_bytes),
      static_cast<long long>(n.variable_bytes), n.total_flops(),
      static_cast<long long>(p.recomputed_steps()));
}

int run(int argc, char** argv) {
  int ranks = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::string mesh_text = "batch:" + std::to_string(ranks), layout_text = "batch:batch",
              opt = "adam";
  int steps = 3, microbatches = 1;
  bool shard_optimizer = false;
  mtk::DType variable_dtype = mtk::DType::float32, slot_dtype = mtk::DType::float32;
  mtk::Rounding variable_rounding = mtk::Rounding::nearest;
  mtk::Config program_config = mtk::Config::from_string("{}", "--program");
  mtk::nn::TransformerConfig c;  // defaults are the standard benchmark model
  c.vocab_size = 32000;
  c.d_model = 512;
  c.d_ff = 2048;
  c.num_heads = 8;
  c.d_kv = 64;
  c.num_layers = 6;
  c.length = 256;
  c.batch = 8;
  for (int i = 1; i < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      if (rank == 0)
        std::printf(
            "bench_lm_train: training throughput and peak memory of the standard benchmark model "
            "(one JSON object).\nOptions: --mesh M --layout L --steps N (0: the prediction only) "
            "--optimizer adam|adafactor|sgd\n  --d_model --d_ff --heads --d_kv --layers --vocab "
            "--seq --batch N --window W (local attention)\n  --recompute "
            "none|norms|attention|layer "
            "--microbatches K --loss-chunks C --bf16 --shard-optimizer\n  --variable-dtype "
            "float32|bfloat16 --slot-dtype float32|bfloat16 --variable-rounding "
            "nearest|stochastic\n  --program KEY=VALUE (repeatable: program.KEY of the run config, "
            "e.g. --program in_place_updates=false)\n"
            "See the comment at the top of bench/bench_lm_train.cpp and docs/performance.md.\n");
      return 0;
    }
    if (k == "--shard-optimizer") {
      shard_optimizer = true;
      --i;
      continue;
    }
    if (k == "--bf16") {
      c.activation_dtype = "bfloat16";
      --i;
      continue;
    }
    if (i + 1 >= argc)
      mtk::fail("bench_lm_train", "option " + k + " needs a value");
    std::string v = argv[i + 1];
    if (k == "--mesh")
      mesh_text = v;
    else if (k == "--layout")
      layout_text = v;
    else if (k == "--steps")
      steps = std::stoi(v);
    else if (k == "--optimizer")
      opt = v;
    else if (k == "--d_model")
      c.d_model = std::stoll(v);
    else if (k == "--d_ff")
      c.d_ff = std::stoll(v);
    else if (k == "--heads")
      c.num_heads = std::stoll(v);
    else if (k == "--d_kv")
      c.d_kv = std::stoll(v);
    else if (k == "--layers")
      c.num_layers = std::stoll(v);
    else if (k == "--vocab")
      c.vocab_size = std::stoll(v);
    else if (k == "--seq")
      c.length = std::stoll(v);
    else if (k == "--batch")
      c.batch = std::stoll(v);
    else if (k == "--microbatches")
      microbatches = std::stoi(v);
    else if (k == "--recompute")
      c.recompute = recompute_of(v);
    else if (k == "--loss-chunks")
      c.loss_chunks = std::stoll(v);
    else if (k == "--window")
      c.attention_window = std::stoll(v);
    else if (k == "--program")  // docs/configuration.md#program
      program_config.apply_override("program." + v);
    else if (k == "--variable-dtype" && mtk::dtype_from_name(v, variable_dtype))
      continue;
    else if (k == "--slot-dtype" && mtk::dtype_from_name(v, slot_dtype))
      continue;
    else if (k == "--variable-rounding" && (v == "nearest" || v == "stochastic"))
      variable_rounding = v == "nearest" ? mtk::Rounding::nearest : mtk::Rounding::stochastic;
    else
      mtk::fail("bench_lm_train",
                "unknown option or value: " + k + " " + v + " (--help lists them)");
  }
  const auto rates = machine_matmul_rates();
  const auto precision =
      c.activation_dtype == "bfloat16" ? mtk::Precision::bfloat16 : mtk::Precision::float32;
  const auto fastest = mtk::kernels::fastest_matmul(rates, precision);
  const double ceiling = fastest.gflops;
  std::string rates_json;
  for (const auto& r : rates)
    rates_json +=
        mtk::cat(rates_json.empty() ? "" : ",", "{\"backend\":\"", r.backend, "\",\"dtype\":\"",
                 mtk::precision_name(r.precision), "\",\"gflops\":", r.gflops, "}");

  const mtk::ProgramOptions options = mtk::config::program_schema().read(program_config, "program");
  mtk::set_node_allreduce(options.node_allreduce);
  mtk::KokkosBytes::start();
  mtk::Graph g(options);
  std::unique_ptr<mtk::optim::Optimizer> optimizer;
  if (opt == "adafactor")
    optimizer = std::make_unique<mtk::optim::Adafactor>();
  else
    optimizer = std::make_unique<mtk::optim::Adam>();
  optimizer->set_state_dtypes(variable_dtype, slot_dtype, variable_rounding);
  mtk::Mesh mesh(mtk::MeshShape::parse(mesh_text), MPI_COMM_WORLD);
  const mtk::LayoutRules rules = mtk::LayoutRules::parse(layout_text);
  if (shard_optimizer)
    optimizer->set_sharding({rules, mesh.shape()});
  mtk::optim::LearningRateSchedule lr;
  lr.kind = mtk::optim::LearningRateSchedule::Kind::constant;
  lr.value = 1e-4;
  const mtk::nn::ModelGraph m = mtk::nn::build_training(g, c, microbatches, *optimizer, lr).model;
  auto program = mtk::lower(g, mesh, optimizer->layout_rules(rules));
  if (steps == 0) {
    if (rank == 0)
      print_prediction(*program, c, microbatches, mesh_text, layout_text);
    return 0;
  }

  const mtk::Shape s{{"batch", c.batch}, {"length", c.length}};
  std::mt19937 rng(0);
  std::vector<std::int32_t> in, tg, seg(static_cast<size_t>(c.batch * c.length), 1), pos;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t l = 0; l < c.length; ++l) {
      in.push_back(static_cast<std::int32_t>(1 + rng() % (c.vocab_size - 1)));
      tg.push_back(static_cast<std::int32_t>(1 + rng() % (c.vocab_size - 1)));
      pos.push_back(static_cast<std::int32_t>(l));
    }
  std::map<int, mtk::HostTensor> feeds{{m.inputs.id(), mtk::HostTensor::ints(s, in)},
                                       {m.targets.id(), mtk::HostTensor::ints(s, tg)},
                                       {m.segments.id(), mtk::HostTensor::ints(s, seg)},
                                       {m.positions.id(), mtk::HostTensor::ints(s, pos)}};
  program->run(feeds, {m.loss});  // warm-up
  program->set_profiling(true);
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = std::chrono::steady_clock::now();
  float loss = 0;
  for (int k = 0; k < steps; ++k)
    loss = program->run(feeds, {m.loss})[0].data<float>()[0];
  MPI_Barrier(MPI_COMM_WORLD);
  const double step_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / steps;
  const double tokens = static_cast<double>(c.batch * c.length);
  // The peer's model-FLOPs formula: 6 x non-embedding params x tokens + attention (each query
  // against every position, or with local attention against its block and the window before it).
  const double hk = static_cast<double>(c.num_heads * c.d_kv);
  const double keys = static_cast<double>(
      c.local_attention() ? c.local_block() + c.attention_window - 1 : c.length);
  const double n_params =
      static_cast<double>(c.num_layers) * (4.0 * c.d_model * hk + 2.0 * c.d_model * c.d_ff) +
      static_cast<double>(c.vocab_size) * c.d_model;
  const double flops =
      6 * n_params * tokens + c.num_layers * 6.0 * 2 * c.batch * c.length * keys * hk;
  auto split = program->time_split();
  const SlowestRank slowest = slowest_rank(split["compute"] / steps, split["collectives"] / steps);
  const long long kokkos_peak = max_over_ranks(mtk::KokkosBytes::peak());
  const long long hwm = max_over_ranks(static_cast<long long>(mtk::peak_resident_bytes()));
  const long long pool = max_over_ranks(program->buffer_pool().bytes());
  const long long pool_peak = max_over_ranks(program->buffer_pool().peak_bytes());
  const std::string bf16_path =
      c.activation_dtype == "bfloat16" ? mtk::kernels::bf16_gemm_description() : std::string("-");
  if (rank == 0) {
    std::printf(
        "{\"bench\":\"lm_train\",\"ranks\":%d,\"mesh\":\"%s\",\"layout\":\"%s\",\"optimizer\":\"%"
        "s\","
        "\"tokens_per_step\":%.0f,\"step_s\":%.4f,\"tokens_per_s\":%.1f,\"model_gflops_per_s\":%."
        "2f,"
        "\"ceiling_gflops\":%.1f,\"ceiling_backend\":\"%s\",\"matmul_rates\":[%s],"
        "\"mfu\":%.3f,\"loss\":%.4f,"
        "\"time_split_s\":{\"compute\":%.4f,\"collectives\":%.4f,\"other\":%.4f},"
        "\"slowest_rank_split_s\":{\"compute\":%.4f,\"collectives\":%.4f},"
        "\"compute_imbalance\":%.3f,"
        "\"comm_bytes_per_step\":%lld,\"peak_bytes\":%lld,\"kokkos_peak_bytes\":%lld,"
        "\"vmhwm_bytes\":%lld,\"pool_bytes\":%lld,\"buffer_reuse\":%s,"
        "\"activation_dtype\":\"%s\",\"bf16_gemm\":\"%s\",\"fp32_gemm\":\"%s\","
        "\"model_flops_per_step\":%.0f,\"recompute\":\"%s\",\"microbatches\":%d,"
        "\"variable_bytes\":%lld,\"recomputed_steps\":%lld,\"program_flops_per_step\":%.0f,"
        "\"live_peak_bytes\":%lld,\"pool_peak_bytes\":%lld,\"predicted_over_kokkos\":%.3f,"
        "\"loss_chunks\":%lld,\"variable_dtype\":\"%s\",\"slot_dtype\":\"%s\","
        "\"variable_rounding\":\"%s\",\"shard_optimizer\":%s,\"attention_window\":%lld,"
        "\"length\":%lld,\"batch\":%lld}\n",
        ranks, mesh_text.c_str(), layout_text.c_str(), opt.c_str(), tokens, step_s, tokens / step_s,
        flops / step_s / 1e9, ceiling, fastest.backend.c_str(), rates_json.c_str(),
        flops / step_s / 1e9 / ceiling, loss, split["compute"] / steps,
        split["collectives"] / steps, split["other"] / steps, slowest.compute, slowest.collectives,
        slowest.imbalance, static_cast<long long>(program->counters().total_comm_bytes()),
        static_cast<long long>(program->counters().peak_bytes), kokkos_peak, hwm, pool,
        program->buffer_reuse() ? "true" : "false", c.activation_dtype.c_str(), bf16_path.c_str(),
        mtk::kernels::fp32_gemm_description().c_str(), flops, mtk::nn::to_string(c.recompute),
        microbatches, static_cast<long long>(program->counters().variable_bytes),
        static_cast<long long>(program->recomputed_steps()), program->counters().total_flops(),
        static_cast<long long>(program->counters().live_peak_bytes), pool_peak,
        static_cast<double>(program->counters().peak_bytes) / static_cast<double>(kokkos_peak),
        static_cast<long long>(c.loss_chunks), mtk::dtype_name(variable_dtype),
        mtk::dtype_name(slot_dtype),
        variable_rounding == mtk::Rounding::stochastic ? "stochastic" : "nearest",
        shard_optimizer ? "true" : "false",
        static_cast<long long>(c.local_attention() ? c.attention_window : 0),
        static_cast<long long>(c.length), static_cast<long long>(c.batch));
  }
  if (rank == 0 && std::getenv("MTK_BENCH_DETAIL")) {
    for (const auto& [k, v] : program->time_by_kind())
      std::fprintf(stderr, "  %-16s %.3f s/step\n", k.c_str(), v / steps);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(
      argc, argv, {"bench_lm_train", /*every_rank_reports=*/true},
      [&](const mtk::Communicator&, const std::vector<std::string>&) { return run(argc, argv); });
}
