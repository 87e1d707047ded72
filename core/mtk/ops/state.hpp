#pragma once
// Training state: cutting gradients and updating variables.

#include <mtk/graph/graph.hpp>

namespace mtk {

Tensor stop_gradient(const Tensor& x);
/// Variable updates; they take effect at the end of Program::run, after every read.
Tensor assign(const Tensor& variable, const Tensor& value);
Tensor assign_add(const Tensor& variable, const Tensor& value);
Tensor assign_sub(const Tensor& variable, const Tensor& value);

}  // namespace mtk
