#pragma once
// Cumulative sums along a named dim, which must be whole on every processor.

#include <mtk/graph/graph.hpp>

#include <string>

namespace mtk {

Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive = false);

}  // namespace mtk
