#pragma once
// Elementwise ops: unary functions, binary functions and comparisons broadcasting by dim name,
// where, cast.

#include <mtk/base/functions.hpp>
#include <mtk/graph/graph.hpp>

namespace mtk {

Tensor unary(UnaryFn fn, const Tensor& x, double p = 0.0);
Tensor negative(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor pow(const Tensor& x, double p);
Tensor add(const Tensor& x, double c);
Tensor multiply(const Tensor& x, double c);

/// Broadcasting by name: the result has a's dims followed by b's dims that a lacks (or
/// `out_shape` when given, which must hold every dim of a and b).
Tensor binary(BinaryFn fn, const Tensor& a, const Tensor& b, const Shape* out_shape = nullptr);
Tensor add(const Tensor& a, const Tensor& b);
Tensor subtract(const Tensor& a, const Tensor& b);
Tensor multiply(const Tensor& a, const Tensor& b);
Tensor divide(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);

/// 1.0 where the comparison holds, else 0.0 (float32).
Tensor compare(CompareFn fn, const Tensor& a, const Tensor& b);
Tensor less(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
/// cond != 0 ? a : b, broadcasting by name.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor cast(const Tensor& x, DType dtype);

}  // namespace mtk
