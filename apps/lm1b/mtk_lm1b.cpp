// mtk-lm1b: One Billion Word language modelling.
//   mtk-lm1b prepare --data CORPUS --out DIR [--vocab-size N]
//   mpiexec -n 2 mtk-lm1b train --config apps/lm1b/configs/demo.yaml --run-dir run/demo
//   mpiexec -n 2 mtk-lm1b eval --config apps/lm1b/configs/demo.yaml --run-dir run/demo
//   mtk-lm1b sample --config apps/lm1b/configs/demo.yaml --run-dir run/demo --prompt "And God"
//   mtk-lm1b config-schema      every config key as Markdown tables (docs/configuration.md)
// `mtk-lm1b COMMAND --help` lists a command's options.
#include <mtk/app/app_main.hpp>

#include "cli.hpp"
#include "lm1b_config.hpp"
#include "mtk_lm1b_prepare.hpp"
#include "mtk_lm1b_run.hpp"
#include "training.hpp"
#include <string>
#include <vector>

namespace {

const char* const kCommands =
    "Commands:\n"
    "  prepare   SentencePiece vocabulary and token shards from an LM1B-layout corpus\n"
    "  train     train the Transformer language model (on any number of MPI ranks)\n"
    "  eval      perplexity of a checkpoint on the held-out shard\n"
    "  sample    generate text from a checkpoint\n"
    "  config-schema  every config key: type, default, allowed values, meaning (Markdown)\n"
    "`mtk-lm1b COMMAND --help` lists a command's options (docs/lm1b.md).";

bool is_command(const std::string& c) {
  return c == "prepare" || c == "train" || c == "eval" || c == "sample" || c == "config-schema";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  mtk::AppOptions options;
  options.name = is_command(command) ? "mtk-lm1b " + command : "mtk-lm1b";
  options.abort_on_local_error = true;
  // Before MPI and Kokkos start: a stop signal during train's start-up is honoured, not fatal.
  options.stop_signals = command == "train";
  return mtk::app_main(
      argc, argv, options,
      [&](const mtk::Communicator& world, const std::vector<std::string>& args) {
        if (is_command(command)) {
          const std::vector<std::string> rest(args.begin() + 1, args.end());
          if (command == "prepare")
            return mtk::lm1b::prepare_main(rest);
          if (command == "train")
            return mtk::lm1b::train_main(rest);
          if (command == "eval")
            return mtk::lm1b::eval_main(rest);
          if (command == "config-schema")
            return mtk::app::config_schema_main(rest, "mtk-lm1b", mtk::lm1b::config_reference());
          return mtk::lm1b::sample_main(rest);
        }
        // No command, or not a known one: --help, --version, or a usage error.
        CLI::App app{"One Billion Word language modelling with MTK.", "mtk-lm1b"};
        mtk::cli::configure(app);
        app.footer(kCommands);
        std::string name;
        app.add_option("command", name, "prepare | train | eval | sample | config-schema")
            ->required()
            ->check(CLI::IsMember({"prepare", "train", "eval", "sample", "config-schema"}));
        const int status = mtk::cli::parse(app, args, world.rank() == 0);
        return status >= 0 ? status : 2;
      });
}
