#pragma once
// Source ops: variables, placeholders, constants, ranges and random values (and dropout).

#include <mtk/graph/graph.hpp>

#include <cstdint>
#include <string>

namespace mtk {

/// A trainable (or, with trainable = false, state-only) float32 variable.
Tensor variable(Graph& g, const std::string& name, const Shape& shape, const Initializer& init,
                bool trainable = true, DType dtype = DType::float32);
/// A value supplied at every Program::run.
Tensor placeholder(Graph& g, const std::string& name, const Shape& shape,
                   DType dtype = DType::float32);
Tensor constant(Graph& g, const Shape& shape, double value, DType dtype = DType::float32);
/// Position along `dim`, broadcast over nothing else: shape [dim].
Tensor range(Graph& g, const Dimension& dim, DType dtype = DType::int32);
/// Random values that depend only on the seed and the global index (layout-independent).
Tensor random_uniform(Graph& g, const Shape& shape, std::uint64_t seed, double low = 0.0,
                      double high = 1.0);
Tensor random_normal(Graph& g, const Shape& shape, std::uint64_t seed, double mean = 0.0,
                     double stddev = 1.0);
/// x * mask / (1 - rate) with a layout-independent mask; identity when rate == 0.
Tensor dropout(const Tensor& x, double rate, std::uint64_t seed);

}  // namespace mtk
