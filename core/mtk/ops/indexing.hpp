#pragma once
// Indexing by int32 ids: one-hot encodings, embedding lookups and their gradient (scatter-add).

#include <mtk/graph/graph.hpp>

#include <string>

namespace mtk {

/// ids (int32) -> ids' dims plus `dim`: on where the id equals the position.
Tensor one_hot(const Tensor& ids, const Dimension& dim, double on = 1.0, double off = 0.0);
/// Embedding lookup of ids (int32) along table dim `dim`: ids' dims plus the table's other dims.
Tensor gather(const Tensor& table, const Tensor& ids, const std::string& dim);
/// table_shape-shaped sum of `updates` rows scattered to positions `ids` along `dim`.
Tensor scatter_add(const Tensor& ids, const Tensor& updates, const Shape& table_shape,
                   const std::string& dim);
/// sum + scatter_add(ids, updates, sum.shape(), dim), scattered into the sum's buffer where it
/// dies here (no table of its own): how the embedding tables' gradients of the microbatch slices
/// are summed after the last slice.
Tensor scatter_add_into(const Tensor& sum, const Tensor& ids, const Tensor& updates,
                        const std::string& dim);

}  // namespace mtk
