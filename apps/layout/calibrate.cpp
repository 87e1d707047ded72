// mtk-layout calibrate: measures this machine's numbers for the step-time model with short runs
// of MTK's own kernels (einsum through gemm at several sizes, elementwise adds, exps and sums) and
// collectives (allreduce and neighbour exchange by size over groups of consecutive ranks and of
// ranks a stride apart), on every rank at once; writes a machine file.
//   OPENBLAS_NUM_THREADS=1 mpiexec -n 2 mtk-layout calibrate --out layouts/machines/mine.yaml

#include <mtk/app/exit_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/cost/step_time.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/halo.hpp>
#include <mtk/kernels/matmul_ceiling.hpp>
#include <mtk/kernels/reduce.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/halo.hpp>
#include <mtk/parallel/mesh.hpp>

#include "calibrate_halo.hpp"
#include "calibrate_shapes.hpp"
#include "calibrate_timing.hpp"
#include "cli.hpp"
#include "layout_commands.hpp"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

namespace mtk::layout_app {

namespace {

// The bandwidth B with collective_seconds(allreduce, bytes, 1, p, {latency, B}) == seconds.
double solve_bandwidth(double seconds, std::int64_t bytes, std::int64_t p, double latency) {
  double lo = 1e3, hi = 1e15;
  for (int i = 0; i < 200; ++i) {
    const double mid = std::sqrt(lo * hi);
    const double t =
        cost::collective_seconds(Collective::allreduce, bytes, 1, p, {0, mid, latency});
    (t > seconds ? lo : hi) = mid;
  }
  return std::sqrt(lo * hi);
}

// What `mtk-layout calibrate` was asked for.
struct CalibrateOptions {
  std::string out, name;
  std::int64_t n = 1024;  // the largest square matmul
  int reps = 5;
};

// Parses the command line into `o`; returns the exit status when done already (--help, a usage
// error), else -1.
int parse_options(const Communicator& world, const std::vector<std::string>& args,
                  CalibrateOptions& o) {
  CLI::App app{
      "Measures this machine for `mtk-layout search`: the matmul rate by size, elementwise\n"
      "bandwidth, per-step overhead and collective latency/bandwidth, with the project's own\n"
      "kernels and collectives, and writes a machine file. Run with one rank per processor\n"
      "as the jobs will: mpiexec -n R mtk-layout calibrate (OPENBLAS_NUM_THREADS=1 on CPUs).",
      "mtk-layout calibrate"};
  cli::configure(app);
  app.add_option("--out", o.out, "The machine file to write (YAML)")->type_name("FILE");
  app.add_option("--name", o.name, "The machine's name in the file")->type_name("TEXT");
  app.add_option("--matmul-size", o.n, "The largest square matmul timed (>= 16)")
      ->check(CLI::Range(std::int64_t{16}, std::int64_t{1} << 20));
  app.add_option("--reps", o.reps, "Timed runs per measurement; the best counts (>= 1)")
      ->check(CLI::Range(1, 1000000));
  return cli::parse(app, args, world.rank() == 0);
}

// matmul by gemm size: [b, s, s] x [b, s, s] -> [b, s, s] through the einsum kernel (one gemm
// per batch entry, as the attention products run), b chosen for ~1e9 FLOPs per run (long enough
// to see this rank's sustained share of a core when ranks share one, as steps do); the
// largest size, s = n, is matmul_flops, and the same in bfloat16 matmul_bf16_flops (the path a
// bf16 run's einsums take: oneDNN's native bf16, or rounded operands through the fp32 gemm).
void measure_matmul(const Communicator& world, const ExecSpace& space, const CalibrateOptions& o,
                    cost::Machine& m) {
  auto rate = [&](std::int64_t sz, Precision precision) {
    const double each = 2.0 * static_cast<double>(sz) * sz * sz;
    const std::int64_t b = std::max<std::int64_t>(1, static_cast<std::int64_t>(1e9 / each));
    const Shape a{{"b", b}, {"i", sz}, {"k", sz}}, y{{"b", b}, {"k", sz}, {"j", sz}},
        c{{"b", b}, {"i", sz}, {"j", sz}};
    auto xa = kernels::fill<float>(space, b * sz * sz, 1.0f);
    auto xb = kernels::fill<float>(space, b * sz * sz, 0.5f);
    const double s =
        best_seconds(world, o.reps, [&] { kernels::einsum(space, a, xa, y, xb, c, precision); });
    return cost::MatmulPoint{each, each * static_cast<double>(b) / s};
  };
  const std::int64_t n = o.n;
  for (std::int64_t sz = 16; sz <= n; sz = sz * 2 > n && sz < n ? n : sz * 2)
    m.matmul_sizes.push_back(rate(sz, Precision::float32));
  m.matmul_flops = m.matmul_sizes.back().flops;
  m.matmul_bf16_flops = rate(n, Precision::bfloat16).flops;
}

// Every matrix-product backend the build has on one [n, n] x [n, n] product, on every rank at
// once (a rank's share of the node), the slowest rank's rate each; for the file's comment and the
// report: which library is the ceiling for each dtype.
std::string measure_backends(const Communicator& world, const ExecSpace& space,
                             const CalibrateOptions& o) {
  world.barrier();
  std::vector<kernels::MatmulRate> rates = kernels::measure_matmul_rates(space, o.n, o.reps);
  for (kernels::MatmulRate& r : rates)
    r.gflops = world.min(r.gflops);
  std::string text = cat("Matmul backends on [", o.n, ", ", o.n, "] x [", o.n, ", ", o.n,
                         "], GFLOP/s per rank (the slowest rank's):");
  for (const kernels::MatmulRate& r : rates)
    text += cat("\n  ", r.backend, ": ", precision_name(r.precision), " ",
                static_cast<long long>(r.gflops + 0.5));
  for (Precision p : {Precision::float32, Precision::bfloat16}) {
    const kernels::MatmulRate best = kernels::fastest_matmul(rates, p);
    text += cat("\n  fastest for ", precision_name(p), ": ", best.backend, ", ",
                static_cast<long long>(best.gflops + 0.5));
  }
  return text;
}

// Elementwise traffic: an add, an exp and a sum over the last dim of 1M floats (activation
// sized), bytes read + written over the time of all three, as Counters::op_bytes counts them; and
// per step kind.
void measure_elementwise(const Communicator& world, const ExecSpace& space, int reps,
                         cost::Machine& m) {
  const std::int64_t e = 1 << 20, rows = e / 256;
  const Shape s1{{"i", e}}, s2{{"r", rows}, {"c", 256}}, s3{{"r", rows}};
  auto x = kernels::fill<float>(space, e, 1.0f), y = kernels::fill<float>(space, e, 2.0f);
  const int k = 20;  // ~50 ms per run
  const double s = best_seconds(world, reps, [&] {
    for (int i = 0; i < k; ++i) {
      kernels::binary<float>(space, BinaryFn::add, s1, x, s1, y, s1);
      kernels::unary<float>(space, UnaryFn::exp, x);
      kernels::reduce<float>(space, ReduceFn::sum, s2, x, s3);
    }
  });
  m.elementwise_bytes = 4.0 * static_cast<double>(3 * e + 2 * e + e + rows) * k / s;
  // Per step kind, whose rates differ by 10x and more (an exp is compute-bound, an add is
  // memory-bound, a row sum in between): binary steps as adds; unary steps as the functions
  // training steps use most (scale, square, rsqrt, relu); reduce steps as row sums. Runs of
  // tens of ms.
  auto rate = [&](double bytes_each, int calls, const std::function<void()>& fn) {
    return bytes_each * calls / best_seconds(world, reps, [&] {
             for (int i = 0; i < calls; ++i)
               fn();
           });
  };
  m.elementwise_by_kind[cost::KindKey::named("binary")] =
      rate(12.0 * static_cast<double>(e), 100,
           [&] { kernels::binary<float>(space, BinaryFn::add, s1, x, s1, y, s1); });
  m.elementwise_by_kind[cost::KindKey::named("unary")] =
      rate(4 * 8.0 * static_cast<double>(e), 25, [&] {
        for (UnaryFn f : {UnaryFn::mul_scalar, UnaryFn::square, UnaryFn::rsqrt, UnaryFn::relu})
          kernels::unary<float>(space, f, y, 0.5);
      });
  m.elementwise_by_kind[cost::KindKey::named("reduce")] =
      rate(4.0 * static_cast<double>(e + rows), 20,
           [&] { kernels::reduce<float>(space, ReduceFn::sum, s2, x, s3); });
}

// Per-step overhead: a kernel step on 1 element (launch, output allocation), 20000 in a row.
void measure_step_overhead(const Communicator& world, const ExecSpace& space, int reps,
                           cost::Machine& m) {
  const Shape s1{{"i", 1}};
  auto x = kernels::fill<float>(space, 1, 1.0f);
  const int k = 20000;
  const double s = best_seconds(world, reps, [&] {
    for (int i = 0; i < k; ++i)
      kernels::binary<float>(space, BinaryFn::add, s1, x, s1, x, s1);
  });
  m.op_overhead_s = s / k;
}

// The time of allreduces and of neighbour exchanges over `axis` of `mesh` (groups of P ranks) by
// size, every group at once, and the latency and bandwidth fitted to the allreduces' ends.
// `rates`: where the exchanges' packing and placing rates go, measured on this level's path.
void measure_link(const Communicator& world, const ExecSpace& space, int reps, const Mesh& mesh,
                  int axis, int P, cost::LinkLevel& l, cost::Machine* rates = nullptr) {
  // Per call, as steps meet collectives: each after ~1 ms of kernel work on every rank, the
  // work alone subtracted; the mean of k calls, not the luckiest, because ranks sharing a core
  // wait for each other to be scheduled and every call of a step pays that.
  const std::int64_t work_n = 1 << 18;
  const Shape ws{{"i", work_n}};
  auto wx = kernels::fill<float>(space, work_n, 1.0f);
  auto work = [&] { kernels::binary<float>(space, BinaryFn::add, ws, wx, ws, wx, ws); };
  const int k_work = 100;
  const double work_alone = best_seconds(world, reps,
                                         [&] {
                                           for (int i = 0; i < k_work; ++i)
                                             work();
                                         }) /
                            k_work;
  // Seconds of one call of `call` on `count` floats: after work (less the work) and, for the
  // small sizes (20 calls), alone; the slower.
  auto time_call = [&](std::int64_t count, const std::function<void()>& call) {
    const int k = count <= (std::int64_t{1} << 15) ? 20 : 4;
    auto timed = [&](bool after_work) {
      return best_seconds(world, reps,
                          [&] {
                            for (int i = 0; i < k; ++i) {
                              if (after_work)
                                work();
                              call();
                            }
                          }) /
             k;
    };
    return std::max({0.0, timed(true) - work_alone, k > 4 ? timed(false) : 0.0});
  };
  // A neighbour exchange costs microseconds, below the noise of the work's milliseconds: each
  // call timed alone after the work (which leaves the strips out of cache, as in a step); the
  // median call, the most over the ranks: ranks arrive at an exchange a few microseconds apart
  // (a host's jitter over the work), and every rank waits at some of a step's exchanges.
  auto time_exchange = [&](std::int64_t count, const std::function<void()>& call) {
    const int k = count <= (std::int64_t{1} << 15) ? 20 : 4;
    call();  // warm-up
    std::vector<double> calls;
    for (int r = 0; r < reps; ++r) {
      world.barrier();
      for (int i = 0; i < k; ++i) {
        work();
        Kokkos::fence();
        const auto t0 = std::chrono::steady_clock::now();
        call();
        Kokkos::fence();
        calls.push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    std::nth_element(calls.begin(), calls.begin() + static_cast<std::ptrdiff_t>(calls.size() / 2),
                     calls.end());
    return world.max(calls[calls.size() / 2]);
  };
  // 32 B to 8 MiB by factors of 4: MPI libraries switch protocols (eager, pipelined cells,
  // single copy) between them, and with ranks sharing a core every hand-over of a pipeline
  // waits for the scheduler, so the time is a step function of the size.
  l.sizes_group = P;
  for (std::int64_t count = 8; count <= (std::int64_t{1} << 21); count *= 4) {
    Kokkos::View<float*> v("calibrate", static_cast<size_t>(count));
    l.allreduce_sizes.push_back({4.0 * static_cast<double>(count),
                                 time_call(count, [&] { allreduce<float>(mesh, {axis}, v); })});
    // A halo exchange of the same bytes in all: half to each neighbour along a ring, through
    // the path a program's exchange site takes (shared memory within a node, else MPI).
    const auto strip = static_cast<size_t>(count / 2);
    Kokkos::View<float*> to_left("to_left", strip), to_right("to_right", strip),
        from_left("from_left", strip), from_right("from_right", strip);
    HaloSite site;
    const auto hand_over = [&] {
      halo_hand_over(mesh, axis, site, to_left, to_right, from_left, from_right);
    };
    for (int i = 0; i < HaloSite::kSharedMemoryAfter; ++i)  // a site's path from then on
      hand_over();
    l.halo_sizes.push_back({4.0 * static_cast<double>(count), time_exchange(count, hand_over)});
    l.halo_by_copies = site.channel != nullptr;
  }
  if (rates != nullptr)  // the hand-over of the rates' two strips, as the model interpolates it
    measure_halo_steps(world, mesh, axis, reps,
                       l.measured_halo_seconds(8.0 * static_cast<double>(kHaloRateStrip)), *rates);
  const double steps = 2 * std::min(P - 1.0, std::ceil(std::log2(static_cast<double>(P))));
  l.latency = l.allreduce_sizes.front().seconds / steps;
  l.bandwidth =
      solve_bandwidth(l.allreduce_sizes.back().seconds,
                      static_cast<std::int64_t>(l.allreduce_sizes.back().bytes), P, l.latency);
}

// Every link level: groups of consecutive ranks, then groups of ranks a stride apart.
void measure_links(const Communicator& world, const ExecSpace& space, int reps, cost::Machine& m) {
  const int R = world.size();
  // Groups of `span` consecutive ranks, for every span dividing R.
  for (int span = 2; span <= R; ++span) {
    if (R % span != 0)
      continue;
    Mesh mesh(MeshShape::parse(cat("outer:", R / span, ";inner:", span)), world);
    cost::LinkLevel l;
    l.span = span == R ? 0 : span;
    measure_link(world, space, reps, mesh, mesh.axis("inner"), span, l,
                 m.links.empty() ? &m : nullptr);
    m.links.push_back(l);
  }
  // Groups of ranks `stride` apart (a mesh dim that is not the last one), for every stride
  // dividing R: with ranks placed round-robin over cores or nodes they share hardware that
  // consecutive ranks do not.
  for (int stride = 2; stride < R; ++stride) {
    if (R % stride != 0)
      continue;
    Mesh mesh(MeshShape::parse(cat("outer:", R / stride, ";inner:", stride)), world);
    cost::LinkLevel l;
    l.stride = stride;
    l.span = (R / stride - 1) * stride + 1;
    measure_link(world, space, reps, mesh, mesh.axis("outer"), R / stride, l);
    m.links.push_back(l);
  }
  if (m.links.empty())  // one rank: no collective to time; an explicit placeholder
    m.links.push_back({0, 1e10, 1e-5});
}

// The machine file's comment: how it was measured.
std::string calibration_comment(int ranks, const CalibrateOptions& o, const std::string& backends) {
  return cat(
      "Measured by `mtk-layout calibrate` on ", ranks, " ranks, every rank busy at once; best of ",
      o.reps, " runs of:\nbatched einsums [b,s,s]x[b,s,s] (s = 16..", o.n,
      ", ~1e9 FLOPs a run; float32 by size,\nbfloat16 at s = ", o.n, "),\n",
      "skinny einsums [4096,256]x[256,d] and [4096,d]x[d,256] (d = 2..128),\n",
      "the 3x3x3 patches of a [16,16,16,16] block and their fold,\n",
      "[1024,16,64] -> [16,1024,64] reorders (einsum operands),\n",
      "20 x (add + exp + sum of 1M floats), per step kind 100 adds, 25 x (scale, square, rsqrt,\n",
      "relu) and 20 row sums of 1M floats, 20000 one-element adds, allreduces and neighbour\n",
      "exchanges (ring) of 32 B to 8 MiB by factors of 4 (20 calls up to 128 KiB, 4 above; each\n",
      "after 1 ms of adds, the adds' time subtracted, and alone up to 128 KiB; the slower)\n",
      "per group of consecutive ranks and per group of ranks a stride apart. Collective waits: ",
      to_string(collective_wait()), "\n(MTK_COLLECTIVE_WAIT; run the jobs with the same policy).\n",
      backends);
}

}  // namespace

int run_calibrate(const Communicator& world, const std::vector<std::string>& args) {
  CalibrateOptions o;
  if (const int status = parse_options(world, args, o); status >= 0)
    return status;
  const int R = world.size();
  ExecSpace space;
  cost::Machine m;
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  m.name = o.name.empty() ? cat(host, ", ", R, " ranks (mtk-layout calibrate)") : o.name;
  measure_matmul(world, space, o, m);
  const std::string backends = measure_backends(world, space, o);
  measure_elementwise(world, space, o.reps, m);
  measure_step_overhead(world, space, o.reps, m);
  measure_narrow_matmul(world, space, o.reps, m);
  measure_patches(world, space, o.reps, m);
  m.memory_bytes = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) *
                   static_cast<std::int64_t>(sysconf(_SC_PAGESIZE)) / R;
  measure_links(world, space, o.reps, m);
  m.validate();
  const std::string yaml = machine_to_yaml(m, calibration_comment(R, o, backends));
  if (world.rank() == 0) {
    std::printf("%s", yaml.c_str());
    if (!o.out.empty()) {
      std::ofstream f(o.out);
      f << yaml;
      if (!f)
        fail("mtk-layout calibrate", "cannot write '" + o.out + "'");
    }
  }
  return kExitOk;
}

}  // namespace mtk::layout_app
