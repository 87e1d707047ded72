#pragma once
// The precision of a contraction: float32, or bfloat16 operands with float32 accumulation and a
// float32 result (what the paper trained with). Tensors stay float32 either way; the choice is a
// property of each einsum op (ops/einsum.hpp) and of the kernel call (kernels/einsum.hpp); the
// rounding itself is in kernels/bfloat16.hpp.

namespace mtk {

enum class Precision { float32, bfloat16 };

inline const char* precision_name(Precision p) {
  return p == Precision::bfloat16 ? "bfloat16" : "float32";
}

}  // namespace mtk
