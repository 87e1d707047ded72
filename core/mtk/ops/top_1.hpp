#pragma once
// The maximum along a named dim and its position.

#include <mtk/graph/graph.hpp>

#include <string>
#include <utility>

namespace mtk {

/// Max along `dim` and its (int32) position; `dim` must be whole on every processor.
std::pair<Tensor, Tensor> top_1(const Tensor& x, const std::string& dim);

}  // namespace mtk
