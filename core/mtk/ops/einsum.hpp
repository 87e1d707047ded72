#pragma once
// Einsum by dimension names: contractions, batch products, sums and transposes in one op.

#include <mtk/graph/graph.hpp>

#include <string>
#include <vector>

namespace mtk {

/// Einsum by names: dims in the output are kept (batch dims when several inputs have them), the
/// others are summed. One to any number of operands (contracted left to right). Two-operand
/// contractions run in the graph's contraction precision (bfloat16: operands rounded to bf16,
/// float32 sums and result).
Tensor einsum(const std::vector<Tensor>& xs, const Shape& out_shape);
/// In the given precision instead of the graph's (Graph::contraction_precision()).
Tensor einsum(const std::vector<Tensor>& xs, const Shape& out_shape, Precision precision);
/// Output dims given by name, sizes taken from the inputs.
Tensor einsum(const std::vector<Tensor>& xs, const std::vector<std::string>& out_dims);
/// sum + einsum(xs, sum.shape()) for two operands, contracted into the sum's buffer where it dies
/// here (the gemm adds into it: no buffer for the product); how gradients() adds a weight's
/// gradient of a microbatch slice into the earlier slices' sum.
Tensor einsum_accumulate(const Tensor& sum, const std::vector<Tensor>& xs, Precision precision);
/// Whether t is einsum_accumulate(sum, ...): the new sum itself, not a part to add to it.
bool accumulates_into(const Tensor& t, const Tensor& sum);
/// `x` summed over the dims `shape` lacks and reordered to `shape` (x itself when it fits): how a
/// gradient is brought back to the shape of its input.
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace mtk
