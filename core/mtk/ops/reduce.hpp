#pragma once
// Reductions along named dims: sums, max/min, softmax, log-softmax, cumulative sums, top-1.

#include <mtk/base/functions.hpp>
#include <mtk/graph/graph.hpp>

#include <string>
#include <utility>
#include <vector>

namespace mtk {

Tensor reduce(ReduceFn fn, const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_sum(const Tensor& x, const std::vector<std::string>& reduced_dims);
/// Sum of every element: a scalar.
Tensor reduce_sum(const Tensor& x);
Tensor reduce_mean(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_mean(const Tensor& x);
Tensor reduce_max(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_min(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor reduce_logsumexp(const Tensor& x, const std::vector<std::string>& reduced_dims);
Tensor softmax(const Tensor& x, const std::string& dim);
Tensor log_softmax(const Tensor& x, const std::string& dim);
Tensor cumsum(const Tensor& x, const std::string& dim, bool exclusive = false);
/// Max along `dim` and its (int32) position; `dim` must be whole on every processor.
std::pair<Tensor, Tensor> top_1(const Tensor& x, const std::string& dim);

}  // namespace mtk
