// mtk-lm1b: One Billion Word language modelling.
//   mtk-lm1b prepare --data CORPUS --out DIR [--vocab-size N]
//   mpiexec -n 2 mtk-lm1b train --config apps/lm1b/configs/demo.yaml --run-dir run/demo
//   mpiexec -n 2 mtk-lm1b eval --config apps/lm1b/configs/demo.yaml --run-dir run/demo
//   mtk-lm1b sample --config apps/lm1b/configs/demo.yaml --run-dir run/demo --prompt "And God"
#include <mtk/app/app_main.hpp>

#include "mtk_lm1b_prepare.hpp"
#include "mtk_lm1b_run.hpp"
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  mtk::AppOptions options;
  options.name = "mtk-lm1b " + command;
  options.abort_on_local_error = true;
  return mtk::app_main(
      argc, argv, options,
      [&](const mtk::Communicator& world, const std::vector<std::string>& args) {
        const std::vector<std::string> rest(args.empty() ? args.end() : args.begin() + 1,
                                            args.end());
        if (command == "prepare")
          return mtk::lm1b::prepare_main(rest);
        if (command == "train")
          return mtk::lm1b::train_main(rest);
        if (command == "eval")
          return mtk::lm1b::eval_main(rest);
        if (command == "sample")
          return mtk::lm1b::sample_main(rest);
        if (world.rank() == 0)
          std::fprintf(
              stderr,
              "usage: mtk-lm1b prepare|train|eval|sample [options]  (--help after a command)\n");
        return 2;
      });
}
