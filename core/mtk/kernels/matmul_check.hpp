#pragma once
// Every float32 matmul backend this process may use, checked against a float64 product
// (kernels/matmul_check.cpp): a backend whose results leave the rounding bound of a dot product is
// wrong and is refused (guard_fp32_matmuls); one that rounds equal dot products differently at
// different positions of a matrix is legitimate but reported (docs/numerics.md).

#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/einsum.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::kernels {

/// A product [m, k] x [k, n].
struct MatmulShape {
  std::int64_t m = 0, n = 0, k = 0;
};

/// One backend on one shape.
struct MatmulCheck {
  Fp32Gemm path = Fp32Gemm::blas;
  std::string backend;  ///< fp32_gemm_description() with the path forced
  MatmulShape shape;
  /// The largest |c - c64| / (u * sum_k |a_ik b_kj|) over the result, u = 2^-24: the error in
  /// units of the rounding bound's scale. Any summation order, blocking or FMA keeps it <= k.
  double worst = 0;
  bool correct = true;  ///< worst <= k (+1 for the final rounding)
  /// Equal rows of a (and equal columns of b) gave bitwise equal results at every position.
  bool position_consistent = true;
};

/// The shapes the guard checks: small and odd sizes (kernel tails), few channels (convolutions),
/// attention's d_kv, and square ones.
std::vector<MatmulShape> standard_check_shapes();

/// Each float32 path this build has on the host (the host BLAS; oneDNN's f32 matmul) on each of
/// `shapes`, through einsum with the path forced, against float64; the forced path is released
/// afterwards (reset_fp32_gemm).
std::vector<MatmulCheck> check_fp32_matmuls(const ExecSpace& space,
                                            const std::vector<MatmulShape>& shapes);

/// The guard run as a process starts (mtk::Environment): where MTK_FP32_GEMM=auto would take a
/// backend that fails check_fp32_matmuls on the standard shapes, the other one is forced and a
/// warning names the failing backend and shape; where a forced backend fails, fails naming it.
/// Host execution spaces only (a GPU's products are not checked here).
void guard_fp32_matmuls(bool print_warning);

}  // namespace mtk::kernels
