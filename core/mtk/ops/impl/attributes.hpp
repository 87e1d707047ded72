#pragma once
// The attributes the op kinds of the elementwise, reduction, contraction, softmax, scan, indexing,
// normalisation, loss and shape families store on their operations (internal): read by the
// families' gradients and lowerings, and by a reference evaluator that walks a graph (the tests'
// float64 twin, tests/float64_twin.hpp).

#include <mtk/base/functions.hpp>
#include <mtk/base/precision.hpp>

#include <cstdint>
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

/// one_hot: a new last dim `dim`, `on` at each id's position and `off` elsewhere.
struct OneHotAttrs {
  std::string dim;
  double on = 1.0, off = 0.0;
};

/// gather (table, ids), scatter_add (ids, updates), scatter_add_into (sum, ids, updates).
struct GatherAttrs {
  std::string dim;  ///< the table dim the ids index
};

/// layer_norm (x, scale, bias -> y, mean, rstd) and layer_norm_grad (x, scale, mean, rstd, dy ->
/// dx, dy * xhat) over `dim`.
struct LayerNormAttrs {
  std::string dim;
  double epsilon = 0.0;
};

/// softmax_cross_entropy (logits, targets -> loss, log-sum-exp) and its gradient (logits,
/// targets, log-sum-exp, dy -> d logits).
struct CrossEntropyAttrs {
  std::string dim;  ///< the vocabulary dim of the logits
  double label_smoothing = 0.0;
  double z_loss = 0.0;
};

/// top_1 (x -> the largest value along `dim`, its first position).
struct Top1Attrs {
  std::string dim;
};

/// slice: [begin, begin + size) of `dim`.
struct SliceAttrs {
  std::string dim;
  std::int64_t begin = 0, size = 0;
};

/// pad: `before` and `after` zeros along `dim`.
struct PadAttrs {
  std::string dim;
  std::int64_t before = 0, after = 0;
};

/// shift: out[i] = x[i - offset] along `dim`, zeros shifted in unless `wrap`.
struct ShiftAttrs {
  std::string dim;
  std::int64_t offset = 0;
  bool wrap = false;
};

/// concat along `dim`.
struct ConcatAttrs {
  std::string dim;
};

}  // namespace mtk::ops_impl
