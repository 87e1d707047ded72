#pragma once
// What every layer is built with: the graph, training or evaluation, and dropout.
// Layers are built only from MTK's core ops, so every layer runs under any layout. Dimension names
// are the contract with the layout: `vocab`, `d_ff`, `heads`, `experts` (and `batch`) are the ones
// layouts usually split.

#include <mtk/graph/graph.hpp>

#include <cstdint>
#include <string>

namespace mtk::nn {

/// Options every layer may need.
struct LayerContext {
  Graph* graph = nullptr;
  bool training = true;
  double dropout_rate = 0.0;
  std::uint64_t seed = 1;  ///< base seed for dropout; each call derives its own from `name`
  /// Dropout of `x` when training with a positive rate; `x` itself otherwise.
  Tensor dropout(const Tensor& x, const std::string& name) const;
};

}  // namespace mtk::nn
