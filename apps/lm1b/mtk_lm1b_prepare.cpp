#include "mtk_lm1b_prepare.hpp"

namespace mtk::lm1b {
int prepare_main(const std::vector<std::string>&) { return 1; }
}  // namespace mtk::lm1b
