#pragma once
// The bfloat16 matmul through oneDNN (kernels/onednn_matmul.cpp, built where oneDNN was found):
// bf16 operands, f32 accumulation and result, host memory only. No oneDNN type appears here.

#include <cstdint>
#include <string>

namespace mtk::kernels::impl {

/// Whether this build has oneDNN.
bool onednn_available();
/// The implementation oneDNN picks for a representative bf16 matmul on this CPU (impl_info_str(),
/// e.g. "brg:avx512_core_amx" or "ref:any"); empty without oneDNN.
std::string onednn_bf16_impl();
/// Whether oneDNN has a bf16 matmul on this CPU at all (2.x: only with avx512_core).
bool onednn_has_bf16();
/// For i < nb: c_i = op(a_i) op(b_i), op = transpose when ta / tb. a_i is M x K ('N') or K x M
/// ('T') row-major at a + i*m*k, b_i K x N or N x K at b + i*k*n, c_i M x N at c + i*m*n. The
/// operands are rounded to bfloat16 (nearest even), products summed in float32. Primitives are
/// cached by shape. Where oneDNN has no bf16 matmul, an f32 one on the operands as given (the
/// einsum kernel passes bf16 values already).
void onednn_bf16_matmul(const float* a, bool ta, const float* b, bool tb, float* c, std::int64_t nb,
                        std::int64_t m, std::int64_t n, std::int64_t k);

}  // namespace mtk::kernels::impl
