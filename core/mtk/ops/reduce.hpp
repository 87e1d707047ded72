#pragma once
// Reductions along named dims: sums, means, max/min, log-sum-exp.

#include <mtk/base/functions.hpp>
#include <mtk/graph/graph.hpp>

#include <string>
#include <vector>

namespace mtk {

Tensor reduce(ReduceFn fn, const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_sum(const Tensor& x, const std::vector<std::string>& reduced_dims);
/// Sum of every element: a scalar.
Tensor reduce_sum(const Tensor& x);
/// reduce_sum(square(x)) over every dim, bitwise, without the squares' tensor (float dtypes).
Tensor reduce_sum_squares(const Tensor& x);
Tensor reduce_mean(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_mean(const Tensor& x);
Tensor reduce_max(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_min(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_logsumexp(const Tensor& x, const std::vector<std::string>& reduced_dims);

}  // namespace mtk
