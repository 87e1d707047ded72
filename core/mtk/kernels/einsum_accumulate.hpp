#pragma once
// Contractions that add into their destination (kernels/einsum.cpp): how a microbatch slice's
// weight gradient is summed into the earlier slices' gradient with no buffer of its own.

#include <mtk/kernels/einsum.hpp>

namespace mtk::kernels {

/// into += einsum(a, b) (out_shape: into's shape), with no buffer for the product where into's
/// memory order lets the gemm write it: beta = 1 (host BLAS, KokkosBlas::gemm) or oneDNN's sum
/// post-op; otherwise the product is made apart and added. Each element is into + (the float32
/// dot product), as einsum then an add gives, on oneDNN's brgemm kernels (AVX-512) at any K and
/// the BLAS where it does not split K; a BLAS that splits K into blocks (OpenBLAS beyond 256 here)
/// adds each block's part into `into` in turn, and oneDNN's jit gemm (AVX2) starts from `into`:
/// float32 reassociation (docs/memory.md).
void einsum_accumulate(const ExecSpace& space, const Shape& a_shape, const FView& a,
                       const Shape& b_shape, const FView& b, const Shape& out_shape,
                       const FView& into, Precision precision = Precision::float32,
                       const Bf16Reuse* reuse = nullptr);

}  // namespace mtk::kernels
