// mtk-fmnist: trains a small CNN on Fashion-MNIST with its images written in spatial blocks that a
// layout splits over mesh dims (halo exchanges between neighbouring ranks), evaluates it on the
// 10k test images after every epoch, and keeps a run directory like the other training apps
// (status.json, config.resolved.yaml, metrics.jsonl, checkpoints/, result.json). docs/spatial.md.
//   mpiexec -n 4 mtk-fmnist train --config apps/fmnist/configs/fmnist.yaml --run-dir run/fmnist
//   mtk-fmnist config-schema      every config key as Markdown tables (docs/configuration.md)

#include <mtk/app/app_main.hpp>
#include <mtk/base/error.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/parallel/node_reducer.hpp>
#include <mtk/signals/stop_signals.hpp>

#include "cli.hpp"
#include "fmnist_config.hpp"
#include "fmnist_training.hpp"
#include "say.hpp"
#include "training.hpp"
#include <string>
#include <vector>

namespace {

using namespace mtk;
constexpr const char* kTool = "mtk-fmnist";

const char* const kCommands =
    "Commands:\n"
    "  train          train the CNN and evaluate it after every epoch (any number of MPI ranks)\n"
    "  config-schema  every config key: type, default, allowed values, meaning (Markdown)\n"
    "`mtk-fmnist COMMAND --help` lists a command's options (docs/spatial.md).";

bool is_command(const std::string& c) {
  return c == "train" || c == "config-schema";
}

// The old command line without a command (`mtk-fmnist --config X`): train, deprecated.
bool is_old_train_form(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h" || a == "--version")
      return false;
  return !args.empty() && args.front().rfind("-", 0) == 0;
}

struct Options : app::RunOptions {
  std::string json_path, data_dir;
};

int parse_train_options(Options& o, const std::vector<std::string>& args, bool print) {
  CLI::App app{
      "Trains a small CNN on Fashion-MNIST with its images split in height and width over the\n"
      "mesh, evaluates it on the test set after every epoch, and resumes from the run\n"
      "directory's newest checkpoint.",
      "mtk-fmnist train"};
  cli::configure(app);
  app::add_run_options(app, o, "apps/fmnist/configs/fmnist.yaml",
                       "Starts from this checkpoint instead of the run's newest");
  app.add_option("--data-dir", o.data_dir, "Fashion-MNIST's IDX files (overrides data.dir)")
      ->type_name("DIR");
  app.add_option("--out", o.json_path, "A copy of RUN_DIR/result.json goes here too")
      ->type_name("FILE");
  cli::deprecated_alias(app, "--json", "--out", o.json_path);  // 0.4's spelling, for a release
  app.add_flag("--print-config", o.print_config,
               "Prints the resolved config (file, --set, --mesh, --layout) as YAML and exits");
  return cli::parse(app, args, print);
}

int train_main(const Communicator& world, const std::vector<std::string>& args) {
  install_stop_signal_handlers();  // app_main did it already; a direct call stays safe
  Options o;
  if (const int status = parse_train_options(o, args, world.rank() == 0); status >= 0)
    return status;
  fmnist::Settings s;
  MeshShape shape;
  LayoutRules rules;
  agree_on_failure(world, [&] {
    app::load_config(o);  // the run directory: --run-dir, else train.run_dir, else "run"
    if (!o.data_dir.empty())
      o.config.set_scalar("data.dir", o.data_dir);
    if (!o.config.has("layout"))
      o.config.set_scalar("layout", "hb:rows;wb:cols");
    s = fmnist::read_settings(o.config);
    shape = fmnist::mesh_for_ranks(o.config, world.size());
    rules = o.config.layout_rules();
    o.resolved_yaml =
        fmnist::effective_config(o.config, s, shape.to_string(), rules.to_string()).dump();
  });
  if (o.print_config) {
    app::say(o.resolved_yaml);
    return 0;
  }
  const Mesh mesh(shape, world);
  app::say(cat(kTool, " train: mesh ", shape.to_string(), ", layout ", rules.to_string(), ", ",
               world.size(), " ranks, ", kokkos_description(), "; run directory ", o.run_dir,
               "\n"));
  const auto data = agree_on_failure(
      world, [&] { return fmnist::read_fashion_mnist(s.data_dir, s.train_limit, s.test_limit); });
  app::say("  %lld training and %lld test images from %s\n",
           static_cast<long long>(data.train_images.count),
           static_cast<long long>(data.test_images.count), s.data_dir.c_str());
  set_node_allreduce(s.program.node_allreduce);  // program.node_allreduce
  fmnist::Trainer trainer(s.model, s.program, mesh, rules);
  return fmnist::run_training(
      s, mesh, data, trainer,
      {o.run_dir, o.restore, o.json_path, o.resolved_yaml, rules.to_string()});
}

int usage_main(const Communicator& world, const std::vector<std::string>& args) {
  CLI::App app{"Fashion-MNIST with its images split over the mesh, with MTK.", kTool};
  cli::configure(app);
  app.footer(kCommands);
  std::string name;
  app.add_option("command", name, "train | config-schema")
      ->required()
      ->check(CLI::IsMember({"train", "config-schema"}));
  const int status = cli::parse(app, args, world.rank() == 0);
  return status >= 0 ? status : 2;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> all(argv + 1, argv + argc);
  const std::string command = all.empty() ? "" : all.front();
  const bool old_form = !is_command(command) && is_old_train_form(all);
  AppOptions options;
  options.name = is_command(command) ? cat(kTool, " ", command) : kTool;
  // Before MPI and Kokkos start: a stop signal during train's start-up is honoured, not fatal.
  options.stop_signals = command == "train" || old_form;
  return app_main(argc, argv, options,
                  [&](const Communicator& world, const std::vector<std::string>& args) {
                    if (old_form) {
                      app::say(cat(kTool, ": warning: options without a command are deprecated ",
                                   "and go in the next release: write `mtk-fmnist train ...`\n"));
                      return train_main(world, args);
                    }
                    if (!is_command(command))
                      return usage_main(world, args);
                    const std::vector<std::string> rest(args.begin() + 1, args.end());
                    if (command == "config-schema")
                      return app::config_schema_main(rest, kTool, fmnist::config_reference());
                    return train_main(world, rest);
                  });
}
