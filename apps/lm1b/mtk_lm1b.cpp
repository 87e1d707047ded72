// mtk-lm1b: One Billion Word language modelling (prepare | train | eval | sample).
#include "mtk_lm1b_prepare.hpp"

#include <mtk_environment.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int status = 2;
  {
    mtk::Environment env(argc, argv);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (!args.empty() && args[0] == "prepare") {
      status = mtk::lm1b::prepare_main(std::vector<std::string>(args.begin() + 1, args.end()));
    } else {
      std::fprintf(stderr, "usage: mtk-lm1b prepare|train|eval|sample [options]\n");
    }
  }
  return status;
}
