#pragma once
// Checks and shape rules shared by the op builders of every family (internal). Each failure
// names the builder (`where`), the tensors with their shapes, the dims and the sizes.

#include <mtk/graph/graph.hpp>

#include <string>
#include <vector>

namespace mtk::ops_impl {

/// The graph of the inputs; fails when there are none, a handle is empty or graphs differ.
Graph& graph_of(const std::vector<Tensor>& xs, const char* where);
/// "'name' [dims]".
std::string describe(const Tensor& t);
void require_float(const Tensor& x, const char* where);
void require_same_dtype(const Tensor& a, const Tensor& b, const char* where);
/// Position of `dim` in x's shape; fails when x lacks it.
int dim_index(const Tensor& x, const std::string& dim, const char* where);
/// The union of the inputs' dims (first appearance order), checking sizes agree by name.
Shape union_shape(const std::vector<Tensor>& xs, const char* where);
/// Fails when a dim of `out` has another size in the inputs.
void check_within(const Shape& out, const std::vector<Tensor>& xs, const char* where);
/// s with dim i replaced by d.
Shape replace_dim(const Shape& s, int i, const Dimension& d);
/// An einsum that may need dims none of its inputs have: contract, then broadcast (gradients).
Tensor einsum_to(const std::vector<Tensor>& xs, const Shape& shape);
/// The same in the given contraction precision (gradients of bf16 einsums).
Tensor einsum_to(const std::vector<Tensor>& xs, const Shape& shape, Precision precision);

}  // namespace mtk::ops_impl
