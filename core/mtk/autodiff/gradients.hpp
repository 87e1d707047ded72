#pragma once
// Reverse-mode automatic differentiation on the graph, as Mesh-TensorFlow does it: the backward
// pass is more operations appended to the same graph, lowered by the same rules as the forward.

#include <mtk/graph/graph.hpp>

#include <vector>

namespace mtk {

/// d(loss)/d(x) for each x in `xs` (loss: a float32 tensor, usually a scalar; a non-scalar loss
/// is summed). Fan-in is summed; an x read by several ops (a weight of the chunked loss head, a
/// shared table) has each later part made by a two-operand einsum contracted into the sum of the
/// parts before (einsum_accumulate: no buffer for the part), unless set_fused_gradient_sums(false).
/// A tensor the loss does not depend on gets zeros.
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& xs);

/// The same plus `initial[i]` for each x (a running sum, e.g. the gradients of earlier
/// microbatches): each part of d(loss)/d(x) is added to it as the sweep makes it, so that the
/// part dies at once instead of living to the end of the backward. `initial` is empty or has one
/// tensor of x's shape per x (an invalid one: no running sum for that x). A part made by a
/// two-operand einsum (a weight's gradient) is contracted straight into the sum (einsum_accumulate:
/// no buffer for the part), unless set_fused_gradient_sums(false).
std::vector<Tensor> gradients(const Tensor& loss, const std::vector<Tensor>& xs,
                              const std::vector<Tensor>& initial);

/// Whether gradients() contracts the xs' einsum parts into their running sums, initial or of the
/// parts before (default on); off: each part is made, then added (tests, benchmarks).
void set_fused_gradient_sums(bool on);
bool fused_gradient_sums();

}  // namespace mtk
