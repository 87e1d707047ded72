#include <mtk/nn/impl/weights.hpp>
#include <mtk/ops/elementwise.hpp>
#include <mtk/ops/sources.hpp>

#include <algorithm>
#include <cmath>

namespace mtk::nn::impl {

Shape replace_dims(const Shape& x, const std::vector<std::string>& drop,
                   const std::vector<Dimension>& add) {
  std::vector<Dimension> dims;
  for (const auto& d : x.dims())
    if (std::find(drop.begin(), drop.end(), d.name) == drop.end())
      dims.push_back(d);
  dims.insert(dims.end(), add.begin(), add.end());
  return Shape(dims);
}

Tensor weight(Graph& g, const std::string& name, const Shape& shape, std::int64_t fan_in) {
  return variable(
      g, name, shape,
      Initializer::normal(static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)))));
}

}  // namespace mtk::nn::impl
