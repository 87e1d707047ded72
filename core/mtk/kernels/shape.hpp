#pragma once
// Shape kernels (the local work of ops/shape.hpp and of relayouts): transpose, broadcast, slice,
// concat, pad, shift.
// (kernels/shape.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>
#include <vector>

namespace mtk::kernels {

/// Reorders dims: out_shape has the same dims as in_shape (by name) in another order.
template <class T>
View<T> transpose(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                  const Shape& out_shape);
/// Repeats x along the dims of out_shape that in_shape lacks (in_shape dims all in out_shape).
template <class T>
View<T> broadcast(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                  const Shape& out_shape);
/// Positions [begin, begin + size) of `dim`.
template <class T>
View<T> slice(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
              std::int64_t begin, std::int64_t size);
/// Concatenation along `dim` (other dims equal).
template <class T>
View<T> concat(const ExecSpace& space, const std::vector<Shape>& shapes,
               const std::vector<View<T>>& xs, int dim);
/// Pads `dim` with `before` and `after` positions of `value`.
template <class T>
View<T> pad(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
            std::int64_t before, std::int64_t after, T value);
/// out[i] = x[i - offset] along `dim`; positions with no source are 0 unless `wrap`.
template <class T>
View<T> shift(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
              std::int64_t offset, bool wrap);

}  // namespace mtk::kernels
