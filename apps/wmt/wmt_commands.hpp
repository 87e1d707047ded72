#pragma once
// The commands of mtk-wmt (docs/wmt.md).

#include <mtk/parallel/communicator.hpp>

#include <string>
#include <vector>

namespace mtk::wmt {

int prepare_main(const Communicator& world, const std::vector<std::string>& args);
int train_main(const Communicator& world, const std::vector<std::string>& args);
int translate_main(const Communicator& world, const std::vector<std::string>& args);

}  // namespace mtk::wmt
