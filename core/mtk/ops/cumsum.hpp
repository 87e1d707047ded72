#pragma once
// Cumulative sums along a named dim.

#include <mtk/graph/graph.hpp>

#include <string>

namespace mtk {

/// Inclusive (or, `exclusive`, exclusive) cumulative sum of float32 x along `dim`, accumulated in
/// double. `dim` may be split over a mesh dim: each processor scans its part from the sum of the
/// parts before it (an allconcat of one double per row), the same values as whole up to the
/// double rounding of that sum (exact for counts, as a mixture of experts' routing takes).
Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive = false);

}  // namespace mtk
