#pragma once
// The matmul rates this process can reach (kernels/matmul_ceiling.cpp): every matrix-product
// backend the build has, measured on one square product, and the fastest per precision, the
// ceiling MFU is reported against (benchmarks, mtk-layout calibrate, metrics).

#include <mtk/base/exec_space.hpp>
#include <mtk/base/precision.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::kernels {

/// One backend's rate on an n x n x n product.
struct MatmulRate {
  std::string backend;  ///< e.g. "OpenBLAS (Haswell kernels)", "oneDNN f32 (brg:avx512_core)"
  Precision precision = Precision::float32;
  double gflops = 0;
};

/// The n of the n^3 product the ceilings are measured on by default: 2048 on the host, 8192 on
/// a GPU (where 2048^3 takes microseconds and leaves the tensor cores short of their rate).
std::int64_t matmul_ceiling_size();

/// Every backend this build and execution space has (host BLAS or Kokkos Kernels' gemm; oneDNN
/// f32; oneDNN bf16 where the CPU has a native one; on an NVIDIA GPU cuBLAS sgemm and bf16;
/// emulated bf16), each timed on [n, n] x [n, n], best of `reps` after a warm-up: the float32 and
/// emulated backends through einsum with the path forced, oneDNN's and cuBLAS's bf16 matmuls on
/// operands already in bf16 (the library's rate; MTK's conversions are its own cost, which MFU
/// against this ceiling shows). Measures this process alone: callers that want a rank's share of
/// a node run it on all ranks at once.
std::vector<MatmulRate> measure_matmul_rates(const ExecSpace& space, std::int64_t n = 2048,
                                             int reps = 3);

/// The fastest of `rates` for `precision`. A bfloat16 product can always run as a float32 one,
/// so the bf16 ceiling is the fastest of both precisions' rates.
MatmulRate fastest_matmul(const std::vector<MatmulRate>& rates, Precision precision);

/// fastest_matmul of measure_matmul_rates(default space, matmul_ceiling_size(), 3), measured on
/// the first call and kept for the life of the process.
MatmulRate matmul_ceiling(Precision precision);

}  // namespace mtk::kernels
