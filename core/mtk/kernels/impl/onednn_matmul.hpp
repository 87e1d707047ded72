#pragma once
// Matrix products through oneDNN's matmul primitive (kernels/onednn_matmul.cpp, built where oneDNN
// was found): float32 or bfloat16 operands in host memory, each described by its dims and element
// strides, so batched operands are read where they lie; f32 accumulation and result. No oneDNN
// type appears here.

#include <cstdint>
#include <string>

namespace mtk::kernels::impl {

/// Batch dims a product may have (oneDNN takes up to 12 dims in all).
constexpr int onednn_max_batch = 8;

/// One batched product c = a b: a [batch..., M, K], b [batch..., K, N], c [batch..., M, N], each
/// operand's element strides listed in that dim order (any strides that do not overlap).
struct StridedMatmul {
  bool bf16 = false;  ///< a and b hold bfloat16 bit patterns (std::uint16_t), else floats
  /// c += a b (a sum post-op: c's old value added to the finished float32 product) instead of
  /// c = a b.
  bool accumulate = false;
  int batch_rank = 0;
  std::int64_t batch[onednn_max_batch] = {};
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t a_strides[onednn_max_batch + 2] = {};
  std::int64_t b_strides[onednn_max_batch + 2] = {};
  std::int64_t c_strides[onednn_max_batch + 2] = {};
};

/// Whether this build has oneDNN.
bool onednn_available();
/// The implementation oneDNN picks for a representative bf16 matmul on this CPU (impl_info_str(),
/// e.g. "brg:avx512_core_amx" or "ref:any"); "none: ..." where it has none, empty without oneDNN.
std::string onednn_bf16_impl();
/// Whether oneDNN has a bf16 matmul on this CPU at all (2.x: only with avx512_core).
bool onednn_has_bf16();
/// The implementation oneDNN picks for a representative f32 matmul (e.g. "brg:avx512_core" or
/// "gemm:jit"); empty without oneDNN.
std::string onednn_f32_impl();
/// The implementation oneDNN picks for `p` ("brg:avx512_core", "gemm:jit", "ref:any"), or "" when
/// oneDNN cannot describe the operands (it then cannot run them). Cached with the primitive.
std::string onednn_matmul_impl(const StridedMatmul& p);
/// Runs `p` on host memory (a, b of the type p.bf16 says; c float, read first when
/// p.accumulate). The primitive is created on
/// the first call for its dims and strides and kept; calls are safe from several threads.
void onednn_matmul(const StridedMatmul& p, const void* a, const void* b, float* c);

}  // namespace mtk::kernels::impl
