// ckpt_writer: a small training job for the checkpoint tests that are driven from outside
// (kill during save, signal-triggered save). It trains the tiny model, saves every K steps with
// CheckpointManager, resumes with --resume, and on SIGTERM/SIGUSR1 finishes the step, saves and
// exits 0. Rank 0 prints one line per event:
//   restored step S from PATH | fresh start
//   step S loss HEXFLOAT DECIMAL      (S: the data step just trained)
//   saved PATH
//   stopped by signal N after step S
//
// usage: ckpt_writer --run-dir DIR --steps N [--save-every K] [--keep K] [--resume]
//                    [--sleep-ms MS] [--pid-dir DIR] [--mesh a:2;b:2] [--layout a|b|c|none|RULES]
// (default mesh: 1x1, 1x2, 2x(n/2) by rank count; default layout: a, see ckpt_test_model.hpp)

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/files/files.hpp>
#include <mtk/signals/stop_signals.hpp>

#include "ckpt_test_model.hpp"
#include "fault_injection.hpp"
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

struct Options {
  std::string run_dir, pid_dir, mesh, layout = "a";
  long steps = 10, save_every = 1000000, keep = 2, sleep_ms = 0;
  bool resume = false;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string a = args[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= args.size())
        mtk::fail("ckpt_writer", "missing value after " + a);
      return args[++i];
    };
    if (a == "--run-dir")
      o.run_dir = next();
    else if (a == "--pid-dir")
      o.pid_dir = next();
    else if (a == "--mesh")
      o.mesh = next();
    else if (a == "--layout")
      o.layout = next();
    else if (a == "--steps")
      o.steps = std::stol(next());
    else if (a == "--save-every")
      o.save_every = std::stol(next());
    else if (a == "--keep")
      o.keep = std::stol(next());
    else if (a == "--sleep-ms")
      o.sleep_ms = std::stol(next());
    else if (a == "--resume")
      o.resume = true;
    else
      mtk::fail("ckpt_writer", "unknown option " + a);
  }
  if (o.run_dir.empty())
    mtk::fail("ckpt_writer", "--run-dir is required");
  return o;
}

int run(const mtk::Communicator& world, const Options& o) {
  const int rank = world.rank(), size = world.size();
  mtk::install_stop_signal_handlers();
  mtk::ckpt_test::install_fault_injection();  // MTK_CKPT_TEST_* (kill_during_save.sh)
  mtk::Mesh mesh(
      o.mesh.empty() ? mtk::test::checkpoint_test_mesh(size) : mtk::MeshShape::parse(o.mesh),
      world);
  const mtk::LayoutRules rules = o.layout == "a"      ? mtk::test::rules_a()
                                 : o.layout == "b"    ? mtk::test::rules_b()
                                 : o.layout == "c"    ? mtk::test::rules_c()
                                 : o.layout == "none" ? mtk::LayoutRules()
                                                      : mtk::LayoutRules::parse(o.layout);
  mtk::test::TinyModel model = mtk::test::make_tiny_model(mesh, rules);
  mtk::Program& program = *model.program;
  mtk::CheckpointManager manager(o.run_dir, static_cast<int>(o.keep), mesh);
  if (o.resume) {
    mtk::CheckpointMetadata meta;
    const bool restored = manager.restore_latest(program, &meta);
    const std::string latest = manager.latest();  // collective: every rank calls it
    if (rank == 0 && restored)
      std::printf("restored step %lld from %s\n", static_cast<long long>(meta.step),
                  latest.c_str());
    else if (rank == 0)
      std::printf("fresh start\n");
  } else if (rank == 0) {
    std::printf("fresh start\n");
  }
  std::fflush(stdout);
  if (!o.pid_dir.empty()) {
    const std::string file = o.pid_dir + "/rank-" + std::to_string(rank) + ".pid";
    mtk::write_file_atomically(file, std::to_string(::getpid()) + "\n", "ckpt_writer");
  }
  auto save = [&] {
    mtk::CheckpointMetadata meta;
    meta.layout = rules.to_string();
    meta.data_position = "step=" + std::to_string(program.step());
    const std::string path = manager.save(program, meta);
    if (rank == 0)
      std::printf("saved %s\n", path.c_str());
    std::fflush(stdout);
  };
  while (program.step() < o.steps) {
    const long long s = program.step();
    const float loss = model.train_step();
    if (rank == 0)
      std::printf("step %lld loss %a %.9g\n", s, static_cast<double>(loss), loss);
    std::fflush(stdout);
    bool saved = false;
    if (program.step() % o.save_every == 0) {
      save();
      saved = true;
    }
    if (mtk::stop_requested(mesh.comm())) {
      if (!saved)
        save();
      if (rank == 0)
        std::printf("stopped by signal after step %lld\n", s);
      std::fflush(stdout);
      return 0;
    }
    if (o.sleep_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(o.sleep_ms));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {"ckpt_writer", /*every_rank_reports=*/true},
                       [](const mtk::Communicator& world, const std::vector<std::string>& args) {
                         return run(world, parse(args));
                       });
}
