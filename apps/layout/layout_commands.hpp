#pragma once
// The subcommands of mtk-layout besides the default report: `search` (search.cpp) and
// `calibrate` (calibrate.cpp). `args` are the arguments after the subcommand's name.

#include <mtk/parallel/communicator.hpp>

#include <string>
#include <vector>

namespace mtk::layout_app {

int run_search(const Communicator& world, const std::vector<std::string>& args);
int run_calibrate(const Communicator& world, const std::vector<std::string>& args);

}  // namespace mtk::layout_app
