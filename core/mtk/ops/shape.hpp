#pragma once
// Shape and layout ops: reshape (and renaming dims), broadcast, slice, concat, pad, shift.

#include <mtk/graph/graph.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk {

/// Same number of elements, new dims (row-major order kept). Changing which mesh dim splits the
/// data lowers to a slice, an allconcat or an alltoall.
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor rename_dimension(const Tensor& x, const std::string& old_name, const std::string& new_name);
/// Replaces dims `old_names` (consecutive) by `new_dims`.
Tensor replace_dimensions(const Tensor& x, const std::vector<std::string>& old_names,
                          const std::vector<Dimension>& new_dims);
/// Repeats x over the dims of `shape` it lacks (and reorders to `shape`).
Tensor broadcast(const Tensor& x, const Shape& shape);
/// Positions [begin, begin + size) of `dim`, renamed `new_name` when given.
Tensor slice(const Tensor& x, const std::string& dim, std::int64_t begin, std::int64_t size,
             const std::string& new_name = "");
Tensor concat(const std::vector<Tensor>& xs, const std::string& dim,
              const std::string& new_name = "");
Tensor pad(const Tensor& x, const std::string& dim, std::int64_t before, std::int64_t after,
           const std::string& new_name = "");
/// out[i] = x[i - offset] along `dim` (zeros shifted in unless `wrap`).
Tensor shift(const Tensor& x, const std::string& dim, std::int64_t offset, bool wrap = false);

}  // namespace mtk
