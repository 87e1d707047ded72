// mtk-ckpt: inspect and check MTK checkpoints (docs/checkpoint-format.md).
//
//   mtk-ckpt info   PATH   variables, shapes, dims, step, mesh and layout of a checkpoint
//   mtk-ckpt verify PATH   manifest and slice hashes, shapes against the metadata (exit 1 when bad)
//   mtk-ckpt list   PATH   the checkpoints of a run directory, the one `latest` names marked
//   mtk-ckpt export PATH --format safetensors --out FILE [--dtype bf16]   the model's weights
//   mtk-ckpt import FILE --config C --run-dir R   a step-0 checkpoint from such a file
//   mtk-ckpt logits PATH --tokens FILE --out FILE  MTK's logits of given tokens (safetensors)
//
// PATH is a checkpoint directory (checkpoints/step-000001000), a checkpoints/ directory or a run
// directory (then the checkpoint `latest` names). verify runs on any number of ranks
// (`mpiexec -n 8 mtk-ckpt verify PATH` divides the hashing among them).

#include <mtk/app/app_main.hpp>
#include <mtk/app/exit_status.hpp>
#include <mtk/base/error.hpp>
#include <mtk/checkpoint/checkpoint.hpp>
#include <mtk/parallel/mesh.hpp>

#include "ckpt_commands.hpp"
#include "cli.hpp"
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace {

int run(const mtk::Communicator& world, const std::vector<std::string>& raw_args) {
  const int rank = world.rank(), size = world.size();
  CLI::App app{
      "Inspects and checks MTK checkpoints; exports and imports their weights as safetensors "
      "(docs/checkpoint-format.md).",
      "mtk-ckpt"};
  mtk::cli::configure(app);
  app.require_subcommand(1);
  app.footer(
      "PATH: a checkpoint directory (checkpoints/step-000001000), a checkpoints/ directory or a\n"
      "run directory (then the checkpoint `latest` names). `mtk-ckpt COMMAND --help` for more.");
  std::string path;
  const char* about[][2] = {
      {"info", "Variables, shapes, dims, step, mesh and layout of a checkpoint"},
      {"verify",
       "Checks the manifest and slice hashes and the shapes against the metadata "
       "(exit 1 when bad); `mpiexec -n N` divides the hashing among N ranks"},
      {"list", "The checkpoints of a run directory, the one `latest` names marked"}};
  for (const auto& [name, text] : about) {
    CLI::App* sub = app.add_subcommand(name, text);
    mtk::cli::configure(*sub, std::string("mtk-ckpt ") + name);
    sub->add_option("PATH", path, "Checkpoint, checkpoints/ or run directory")->required();
  }
  mtk::ckpt_tool::ExportOptions export_options;
  mtk::ckpt_tool::ImportOptions import_options;
  mtk::ckpt_tool::LogitsOptions logits_options;
  CLI::App* export_command = mtk::ckpt_tool::add_export_command(app, export_options);
  CLI::App* import_command = mtk::ckpt_tool::add_import_command(app, import_options);
  CLI::App* logits_command = mtk::ckpt_tool::add_logits_command(app, logits_options);
  if (const int status = mtk::cli::parse(app, raw_args, rank == 0); status >= 0)
    return status;
  if (export_command->parsed())
    return mtk::ckpt_tool::export_main(world, export_options);
  if (import_command->parsed())
    return mtk::ckpt_tool::import_main(world, import_options);
  if (logits_command->parsed())
    return mtk::ckpt_tool::logits_main(world, logits_options);
  const std::vector<std::string> args = {app.get_subcommands().at(0)->get_name(), path};
  const std::string& command = args[0];
  if (command == "list") {
    std::string run_dir = args[1];
    while (run_dir.size() > 1 && run_dir.back() == '/')
      run_dir.pop_back();
    if (run_dir.size() >= 12 && run_dir.compare(run_dir.size() - 12, 12, "/checkpoints") == 0)
      run_dir.resize(run_dir.size() - 12);
    mtk::Mesh mesh(mtk::MeshShape::parse("ranks:" + std::to_string(size)), world);
    mtk::CheckpointManager manager(run_dir, 1, mesh);
    const auto all = manager.list();
    const std::string latest = manager.latest();
    // A checkpoint whose files are garbage is listed as CORRUPT and the listing goes on; the
    // status then says that something is wrong.
    int corrupt = 0;
    if (rank == 0) {
      if (all.empty())
        std::printf("no checkpoints in %s\n", manager.checkpoint_root().c_str());
      else
        std::printf("%s", mtk::format_checkpoint_list(all, latest, &corrupt).c_str());
    }
    return world.max(corrupt) > 0 ? mtk::kExitError : mtk::kExitOk;
  }
  // Every rank resolves the path itself (a shared file system), then agrees.
  std::string dir;
  mtk::agree_on_failure(world, [&] { dir = mtk::resolve_checkpoint_path(args[1]); });
  if (command == "info") {
    if (rank == 0)
      std::printf("%s", mtk::format_checkpoint_info(mtk::checkpoint_info(dir)).c_str());
    return 0;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const mtk::CheckpointVerification v = mtk::verify_checkpoint(dir, world);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank == 0) {
    if (v.ok) {
      std::printf("OK %s: %lld variables, %lld slices, %.2f MiB hashed on %d rank(s) in %.2f s\n",
                  v.path.c_str(), static_cast<long long>(v.variables),
                  static_cast<long long>(v.slices), static_cast<double>(v.bytes_hashed) / (1 << 20),
                  size, seconds);
    } else {
      std::fprintf(stderr, "CORRUPT %s: %zu problem(s)\n", v.path.c_str(), v.errors.size());
      for (const auto& e : v.errors)
        std::fprintf(stderr, "  %s\n", e.c_str());
    }
  }
  return v.ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return mtk::app_main(argc, argv, {"mtk-ckpt"}, run);
}
