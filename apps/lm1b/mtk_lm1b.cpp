// mtk-lm1b: One Billion Word language modelling.
//   mtk-lm1b prepare --data CORPUS --out DIR [--vocab-size N]
//   mpiexec -n 2 mtk-lm1b train --config apps/lm1b/configs/demo.yaml --run-dir run/demo
//   mpiexec -n 2 mtk-lm1b eval --config apps/lm1b/configs/demo.yaml --run-dir run/demo
//   mtk-lm1b sample --config apps/lm1b/configs/demo.yaml --run-dir run/demo --prompt "And God"
#include <mtk/parallel/environment.hpp>
#include <mtk/base/error.hpp>

#include <mpi.h>

#include "mtk_lm1b_prepare.hpp"
#include "mtk_lm1b_run.hpp"
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int status = 2;
  {
    mtk::Environment env(argc, argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<std::string> args(argv + 1, argv + argc);
    const std::string command = args.empty() ? "" : args[0];
    const std::vector<std::string> rest(args.empty() ? args.end() : args.begin() + 1, args.end());
    try {
      if (command == "prepare")
        status = mtk::lm1b::prepare_main(rest);
      else if (command == "train")
        status = mtk::lm1b::train_main(rest);
      else if (command == "eval")
        status = mtk::lm1b::eval_main(rest);
      else if (command == "sample")
        status = mtk::lm1b::sample_main(rest);
      else if (rank == 0)
        std::fprintf(
            stderr,
            "usage: mtk-lm1b prepare|train|eval|sample [options]  (--help after a command)\n");
    } catch (const mtk::AgreedError& e) {
      // Every rank failed alike: report once and finish normally.
      if (rank == 0)
        std::fprintf(stderr, "mtk-lm1b %s: %s\n", command.c_str(), e.what());
      status = 1;
    } catch (const std::exception& e) {
      // This rank alone: the others may be waiting in a collective, so end the whole job.
      std::fprintf(stderr, "mtk-lm1b %s (rank %d): %s\n", command.c_str(), rank, e.what());
      std::fflush(stderr);
      if (size > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
      status = 1;
    }
  }
  return status;
}
