#pragma once
// Model weights into decoding programs, by variable name.

#include <mtk/runtime/program.hpp>

#include <string>
#include <vector>

namespace mtk::decode {

/// Copies every variable of `target` that is not decoding state (nn::is_decoding_state) from the
/// variable of the same name in `source`: a training or evaluation program of the same model
/// (build_transformer), or one a checkpoint was restored into. Same layout: the local slice is
/// copied; another layout or mesh of the same ranks: the variable is gathered (collective) and
/// this rank's slice taken. Throws naming the variable when `source` lacks it or holds another
/// shape. Collective over the programs' ranks. Returns the names copied.
std::vector<std::string> copy_weights(Program& source, Program& target);

}  // namespace mtk::decode
