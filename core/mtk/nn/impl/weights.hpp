#pragma once
// Helpers the layers share: projection weights and the shapes of projected tensors.

#include <mtk/graph/graph.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::nn::impl {

/// Dims of x without `drop`, followed by `add`.
Shape replace_dims(const Shape& x, const std::vector<std::string>& drop,
                   const std::vector<Dimension>& add);

/// A weight initialised with variance scaling over its fan-in: normal(0, 1/sqrt(fan_in)).
Tensor weight(Graph& g, const std::string& name, const Shape& shape, std::int64_t fan_in);

}  // namespace mtk::nn::impl
