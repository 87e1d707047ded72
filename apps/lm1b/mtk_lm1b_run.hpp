#pragma once
// `mtk-lm1b train | eval | sample`: the Transformer language model on prepared LM1B data.

#include <string>
#include <vector>

namespace mtk::lm1b {

/// Each runs the subcommand with the arguments after it and returns the exit status.
int train_main(const std::vector<std::string>& args);
int eval_main(const std::vector<std::string>& args);
int sample_main(const std::vector<std::string>& args);

}  // namespace mtk::lm1b
