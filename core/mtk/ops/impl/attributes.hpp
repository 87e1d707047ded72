#pragma once
// The attributes the elementwise, reduction, contraction, softmax and scan op kinds store on their
// operations (internal): read by the op families' gradients and lowerings, and by a reference
// evaluator that walks a graph (the tests' float64 twin, tests/float64_twin.hpp).

#include <mtk/base/functions.hpp>
#include <mtk/base/precision.hpp>

#include <string>

namespace mtk::ops_impl {

/// unary: y = fn(x), p the scalar of pow_scalar / add_scalar / mul_scalar.
struct UnaryAttrs {
  UnaryFn fn = UnaryFn::identity;
  double p = 0.0;
};

/// binary: z = fn(x, y), broadcast by dimension name.
struct BinaryAttrs {
  BinaryFn fn = BinaryFn::add;
};

/// compare: z = fn(x, y) ? 1 : 0 (float32).
struct CompareAttrs {
  CompareFn fn = CompareFn::equal;
};

/// reduce: fn over the input's dims that the output lacks.
struct ReduceAttrs {
  ReduceFn fn = ReduceFn::sum;
};

/// einsum and einsum_accumulate (y = sum + a x c).
struct EinsumAttrs {
  Precision precision = Precision::float32;  ///< of a two-operand contraction
};

/// softmax and log_softmax over `dim`.
struct SoftmaxAttrs {
  std::string dim;
};

/// softmax_grad (inputs y, dy): of log_softmax where `log`, else of softmax.
struct SoftmaxGradAttrs {
  std::string dim;
  bool log = false;
};

/// cumsum along `dim`, the element itself left out where `exclusive`.
struct CumsumAttrs {
  std::string dim;
  bool exclusive = false;
};

}  // namespace mtk::ops_impl
