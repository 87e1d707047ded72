// mtk-layout calibrate: measures this machine's numbers for the step-time model with short runs
// of MTK's own kernels (einsum through gemm, an elementwise add) and collectives (allreduce over
// groups of consecutive ranks), on every rank at once, and writes a machine file.
//   OPENBLAS_NUM_THREADS=1 mpiexec -n 2 mtk-layout calibrate --out layouts/machines/mine.yaml

#include <mtk/app/exit_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/config/machine_config.hpp>
#include <mtk/cost/step_time.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/parallel/collectives.hpp>
#include <mtk/parallel/mesh.hpp>

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

const char* calibrate_usage =
    "usage: mpiexec -n R mtk-layout calibrate [--out FILE] [--name TEXT] [--matmul-size N]\n"
    "                                         [--reps K]\n"
    "  Run with one rank per processor as the jobs will (OPENBLAS_NUM_THREADS=1 on CPUs).\n";

// Best (smallest) seconds of `reps` runs of `fn`, all ranks starting together; the slowest rank
// counts.
double best_seconds(const Communicator& comm, int reps, const std::function<void()>& fn) {
  fn();  // warm-up
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    comm.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    Kokkos::fence();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, comm.max(s));
  }
  return best;
}

// The bandwidth B with collective_seconds(allreduce, bytes, 1, p, {latency, B}) == seconds.
double solve_bandwidth(double seconds, std::int64_t bytes, std::int64_t p, double latency) {
  double lo = 1e3, hi = 1e15;
  for (int i = 0; i < 200; ++i) {
    const double mid = std::sqrt(lo * hi);
    const double t = cost::collective_seconds("allreduce", bytes, 1, p, {0, mid, latency});
    (t > seconds ? lo : hi) = mid;
  }
  return std::sqrt(lo * hi);
}

}  // namespace

int run_calibrate(const Communicator& world, const std::vector<std::string>& args) {
  std::string out, name;
  std::int64_t n = 1024;
  int reps = 5;
  for (size_t i = 0; i < args.size(); ++i) {
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size())
        fail("mtk-layout calibrate", args[i] + " needs a value\n" + calibrate_usage);
      return args[++i];
    };
    if (args[i] == "--out")
      out = value();
    else if (args[i] == "--name")
      name = value();
    else if (args[i] == "--matmul-size")
      n = std::stoll(value());
    else if (args[i] == "--reps")
      reps = std::stoi(value());
    else if (args[i] == "--help") {
      if (world.rank() == 0)
        std::printf("%s", calibrate_usage);
      return kExitOk;
    } else
      fail("mtk-layout calibrate", "unknown option '" + args[i] + "'\n" + calibrate_usage);
  }
  if (n < 16 || reps < 1)
    fail("mtk-layout calibrate", "--matmul-size must be >= 16 and --reps >= 1");
  const int R = world.size();
  ExecSpace space;
  cost::Machine m;
  char host[256] = "this machine";
  gethostname(host, sizeof host - 1);
  m.name = name.empty() ? cat(host, ", ", R, " ranks (mtk-layout calibrate)") : name;

  {  // matmul: [n, n] x [n, n] through the einsum kernel
    const Shape a{{"i", n}, {"k", n}}, b{{"k", n}, {"j", n}}, c{{"i", n}, {"j", n}};
    auto x = kernels::fill<float>(space, n * n, 1.0f), y = kernels::fill<float>(space, n * n, 0.5f);
    const double s = best_seconds(world, reps, [&] { kernels::einsum(space, a, x, b, y, c); });
    m.matmul_flops = 2.0 * static_cast<double>(n) * n * n / s;
  }
  {  // elementwise: z = x + y over 4M floats (12 bytes per element)
    const std::int64_t e = 1 << 22;
    const Shape s1{{"i", e}};
    auto x = kernels::fill<float>(space, e, 1.0f), y = kernels::fill<float>(space, e, 2.0f);
    const double s = best_seconds(
        world, reps, [&] { kernels::binary<float>(space, BinaryFn::add, s1, x, s1, y, s1); });
    m.elementwise_bytes = cost::kElementwiseBytesPerFlop * static_cast<double>(e) / s;
  }
  m.memory_bytes = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) *
                   static_cast<std::int64_t>(sysconf(_SC_PAGESIZE)) / R;
  // Collectives over groups of `span` consecutive ranks, for every span dividing R.
  for (int span = 2; span <= R; ++span) {
    if (R % span != 0)
      continue;
    Mesh mesh(MeshShape::parse(cat("outer:", R / span, ";inner:", span)), world);
    const int axis = mesh.axis("inner");
    auto time_allreduce = [&](std::int64_t count, int k) {
      Kokkos::View<float*> v("calibrate", static_cast<size_t>(count));
      return best_seconds(world, k, [&] { allreduce<float>(mesh, {axis}, v); });
    };
    const double small = time_allreduce(16, 20 * reps);  // cheap: many tries against noise
    const std::int64_t big = 1 << 21;                    // 8 MiB
    const double large = time_allreduce(big, reps);
    const double P = span, steps = 2 * std::min(P - 1, std::ceil(std::log2(P)));
    cost::LinkLevel l;
    l.span = span == R ? 0 : span;
    l.latency = small / steps;
    l.bandwidth = solve_bandwidth(large, big * 4, span, l.latency);
    m.links.push_back(l);
  }
  if (m.links.empty())  // one rank: no collective to time; an explicit placeholder
    m.links.push_back({0, 1e10, 1e-5});
  m.validate();
  const std::string yaml = machine_to_yaml(
      m, cat("Measured by `mtk-layout calibrate` on ", R, " ranks: einsum ", n,
             "^3, elementwise add of 4M floats, allreduce of 16 floats and 8 "
             "MiB\nper group of consecutive ranks; best of ",
             reps, " runs (", 20 * reps, " for latency) with every rank busy at once."));
  if (world.rank() == 0) {
    std::printf("%s", yaml.c_str());
    if (!out.empty()) {
      std::ofstream f(out);
      f << yaml;
      if (!f)
        fail("mtk-layout calibrate", "cannot write '" + out + "'");
    }
  }
  return kExitOk;
}

}  // namespace mtk::layout_app
