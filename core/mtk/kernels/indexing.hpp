#pragma once
// Indexing: one_hot, gather, scatter_add.
// (kernels/indexing.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

namespace mtk::kernels {

/// out[ids dims + dim] = (ids == origin + position along dim) ? on : off. out_shape is ids_shape
/// with one more dim (at position `dim`), whose local slice starts at global `origin`.
FView one_hot(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
              const Shape& out_shape, int dim, std::int64_t origin, float on, float off);
/// Embedding lookup: out[...] = table[ids[...] - origin, ...] along table dim `table_dim`, or 0
/// when the id falls outside this slice [origin, origin + local size). out_shape's dims are
/// ids_shape's plus table_shape's without table_dim, in any order.
FView gather(const ExecSpace& space, const Shape& table_shape, const FView& table, int table_dim,
             std::int64_t origin, const Shape& ids_shape, const IView& ids, const Shape& out_shape);
/// Gradient of gather: table[ids - origin, ...] += updates[...] for ids inside this slice.
/// Returns a new table-shaped View (zeros plus the scattered updates).
FView scatter_add(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
                  const Shape& updates_shape, const FView& updates, const Shape& table_shape,
                  int table_dim, std::int64_t origin);
/// into += scatter_add(...) with no table of its own (into: table_shape's slice): bitwise the
/// sum of the two (each hit element's rows summed from 0, then added).
void scatter_add_into(const ExecSpace& space, const Shape& ids_shape, const IView& ids,
                      const Shape& updates_shape, const FView& updates, const Shape& table_shape,
                      int table_dim, std::int64_t origin, const FView& into);

}  // namespace mtk::kernels
