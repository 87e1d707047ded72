#pragma once
// Elementwise kernels: fill, unary, binary, compare, where, cast, axpy, fused updates, range.
// (kernels/elementwise.cpp; conventions in kernels/view.hpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/base/functions.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <cstdint>

namespace mtk::kernels {

/// A View of `n` elements all equal to `value`.
template <class T>
View<T> fill(const ExecSpace& space, std::int64_t n, T value);
/// y = f(x); `p` is the scalar of pow_scalar / add_scalar / mul_scalar. A given `into` (x's size,
/// x itself allowed: each value is read before it is written) receives y.
template <class T>
View<T> unary(const ExecSpace& space, UnaryFn fn, const View<T>& x, double p = 0.0,
              const View<T>& into = {});
/// z[out] = f(a[a_shape], b[b_shape]), broadcasting by name: every dim of a and b is in out_shape
/// with the same size. A given `into` receives z; it may be an operand whose shape is out_shape.
template <class T>
View<T> binary(const ExecSpace& space, BinaryFn fn, const Shape& a_shape, const View<T>& a,
               const Shape& b_shape, const View<T>& b, const Shape& out_shape,
               const View<T>& into = {});
/// z[out] = (a cmp b) ? 1.f : 0.f, broadcasting by name.
template <class T>
FView compare(const ExecSpace& space, CompareFn fn, const Shape& a_shape, const View<T>& a,
              const Shape& b_shape, const View<T>& b, const Shape& out_shape);
/// z[out] = cond != 0 ? a : b, broadcasting by name.
FView where(const ExecSpace& space, const Shape& cond_shape, const FView& cond,
            const Shape& a_shape, const FView& a, const Shape& b_shape, const FView& b,
            const Shape& out_shape);
/// Elementwise conversion (float -> int32 truncates toward zero).
template <class To, class From>
View<To> cast(const ExecSpace& space, const View<From>& x);
/// y += alpha * x, in place.
template <class T>
void axpy(const ExecSpace& space, T alpha, const View<T>& x, const View<T>& y);
/// z = a*x + b*y elementwise with the same shape (fused; used for optimizer updates).
FView axpby(const ExecSpace& space, float a, const FView& x, float b, const FView& y);
/// out[...] = origin + position along `dim` (the global index when the dim is split).
template <class T>
View<T> range(const ExecSpace& space, const Shape& out_shape, int dim, std::int64_t origin);

}  // namespace mtk::kernels
