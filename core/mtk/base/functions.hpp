#pragma once
// The elementwise functions and reductions MTK's ops apply. Shared by the graph (ops, gradients)
// and the kernels.

namespace mtk {

/// y = f(x) (p is the op's scalar parameter where it has one).
enum class UnaryFn {
  identity,
  negative,
  abs,
  exp,
  log,
  sqrt,
  rsqrt,
  square,
  reciprocal,
  relu,
  gelu,       // tanh approximation, as Mesh-TensorFlow
  gelu_grad,  // d gelu / dx
  tanh,
  sigmoid,
  sign,
  pow_scalar,  // x^p
  add_scalar,  // x + p
  mul_scalar,  // x * p
  relu_mask,   // 1 if x > 0 else 0
};

/// z = f(x, y) with broadcasting by dimension name.
enum class BinaryFn { add, subtract, multiply, divide, maximum, minimum, pow };

/// z = (x op y) ? 1 : 0, as float32.
/// near_equal: x == y, or (floats) |x - y| <= kNearEqualRelative * max(|x|, |y|): equal up to the
/// rounding by which one product's results differ from another's (a BLAS may round the same dot
/// product differently at different positions of a matrix; docs/numerics.md). The tie test of the
/// max and min gradients, so that a tie does not depend on the matmul library or the layout.
enum class CompareFn { less, less_equal, greater, greater_equal, equal, not_equal, near_equal };

/// The relative tolerance of CompareFn::near_equal: 2^-13 (about 1000 float32 ulps).
inline constexpr float kNearEqualRelative = 1.0f / 8192.0f;

/// sum_squares: the sum of x * x, each square rounded to the tensor's dtype first (bitwise
/// reduce_sum(square(x)) without the squares' tensor; global norms).
enum class ReduceFn { sum, max, min, sum_squares };

const char* unary_name(UnaryFn f);
const char* binary_name(BinaryFn f);
const char* compare_name(CompareFn f);
const char* reduce_name(ReduceFn f);

}  // namespace mtk
