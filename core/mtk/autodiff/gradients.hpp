#pragma once
// Reverse-mode automatic differentiation on the graph, as Mesh-TensorFlow does it: the backward
// pass is more operations appended to the same graph, lowered by the same rules as the forward.

#include <mtk/graph/graph.hpp>

#include <vector>

namespace mtk {

/// d(loss)/d(x) for each x in `xs` (loss: a float32 tensor, usually a scalar; a non-scalar loss
/// is summed). Fan-in is summed. A tensor the loss does not depend on gets zeros.
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& xs);

}  // namespace mtk
