#pragma once
// The factorizations of a processor count into mesh dims (cost/mesh_factorizations.cpp), for the
// layout search.

#include <cstdint>
#include <vector>

namespace mtk::cost::impl {

/// Unordered factorizations of n into at most max_dims factors >= 2 (nonincreasing sizes): one
/// per mesh up to the order of its dims; {{1}} for one processor.
std::vector<std::vector<std::int64_t>> unordered_factorizations(std::int64_t n, int max_dims);

}  // namespace mtk::cost::impl
