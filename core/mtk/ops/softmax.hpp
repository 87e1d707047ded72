#pragma once
// Softmax and log-softmax along a named dim; the dim may be split over a mesh dim (two allreduces).

#include <mtk/graph/graph.hpp>

#include <string>

namespace mtk {

Tensor softmax(const Tensor& x, const std::string& dim);
Tensor log_softmax(const Tensor& x, const std::string& dim);

}  // namespace mtk
