// The matmul rates this process can reach (matmul_ceiling.hpp).
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>
#include <mtk/kernels/matmul_ceiling.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <limits>
#include <mutex>

namespace mtk::kernels {
namespace {

FView filled(std::int64_t n, float scale) {
  FView v(Kokkos::view_alloc(std::string("mtk::kernels::matmul_ceiling operand"),
                             Kokkos::WithoutInitializing),
          static_cast<size_t>(n));
  Kokkos::parallel_for(
      "mtk::kernels::matmul_ceiling fill", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(std::int64_t i) { v(i) = scale * static_cast<float>(i % 17 - 8); });
  return v;
}

// The library's own bf16 matmul (oneDNN's, or the GPU BLAS's on a GPU) on [n, n] x [n, n] bf16
// operands into a float32 result written before: its rate as a program that keeps its operands in
// bf16 gets it. (Through einsum the float32 operands' conversion counted too: on an AMX Xeon
// 647-672 GFLOP/s where oneDNN runs at 720-797.)
double library_bf16_seconds(const ExecSpace& space, std::int64_t n, const FView& a, const FView& b,
                            int reps) {
  const char* label = "mtk::kernels::matmul_ceiling bf16 operand";
  const auto a16 = impl::alloc<std::uint16_t>(label, n * n);
  const auto b16 = impl::alloc<std::uint16_t>(label, n * n);
  convert_to_bfloat16_bits(space, label, a.data(), a16.data(), n * n);
  convert_to_bfloat16_bits(space, label, b.data(), b16.data(), n * n);
  const FView c(std::string("mtk::kernels::matmul_ceiling result"), static_cast<size_t>(n * n));
  impl::StridedMatmul p;
  p.bf16 = true;
  p.m = p.n = p.k = n;
  for (std::int64_t* s : {p.a_strides, p.b_strides, p.c_strides}) {
    s[0] = n;
    s[1] = 1;
  }
  impl::BatchedGemm g;
  g.m = g.n = g.k = n;
  space.fence();
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r <= reps; ++r) {  // r == 0 warms up (the primitive)
    const auto t0 = std::chrono::steady_clock::now();
    if constexpr (impl::gpu_blas_available())
      impl::gpu_blas_gemm_bf16(space, g, a16.data(), b16.data(), c.data());
    else
      impl::onednn_matmul(p, a16.data(), b16.data(), c.data());
    space.fence();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0)
      best = std::min(best, s);
  }
  return best;
}

// Restores the paths in force (the run-time options) when a measurement ends, also on error.
struct PathsRestored {
  ~PathsRestored() {
    reset_fp32_gemm();
    reset_bf16_gemm();
  }
};

}  // namespace

std::int64_t matmul_ceiling_size() {
  return impl::gpu_blas_available() ? 8192 : 2048;
}

std::vector<MatmulRate> measure_matmul_rates(const ExecSpace& space, std::int64_t n, int reps) {
  if (n < 1 || reps < 1)
    fail("mtk::kernels::measure_matmul_rates", cat("n ", n, " and reps ", reps, " must be >= 1"));
  const Shape as{{"i", n}, {"j", n}}, bs{{"j", n}, {"k", n}}, cs{{"i", n}, {"k", n}};
  const FView a = filled(n * n, 1.0f / 64), b = filled(n * n, 1.0f / 32);
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  auto rate = [&](Precision p) {
    double best = std::numeric_limits<double>::infinity();
    for (int r = 0; r <= reps; ++r) {  // r == 0 warms up (primitives, buffers)
      space.fence();
      const auto t0 = std::chrono::steady_clock::now();
      FView c = einsum(space, as, a, bs, b, cs, p);
      space.fence();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0)
        best = std::min(best, s);
    }
    return flops / best * 1e-9;
  };
  const PathsRestored restore;
  std::vector<MatmulRate> out;
  set_fp32_gemm(Fp32Gemm::blas);
  out.push_back({impl::gpu_blas_available()
                     ? cat(impl::gpu_blas_vendor(), " sgemm (", impl::gpu_blas_name(), ")")
                     : host_blas_name(),
                 Precision::float32, rate(Precision::float32)});
  if (impl::onednn_available() &&
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    set_fp32_gemm(Fp32Gemm::onednn);
    out.push_back({cat("oneDNN f32 (", impl::onednn_f32_impl(), ")"), Precision::float32,
                   rate(Precision::float32)});
  }
  reset_fp32_gemm();
  if (impl::onednn_available() && impl::onednn_has_bf16() &&
      Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible) {
    out.push_back({cat("oneDNN bf16 (", impl::onednn_bf16_impl(), ")"), Precision::bfloat16,
                   flops / library_bf16_seconds(space, n, a, b, reps) * 1e-9});
  }
  if constexpr (impl::gpu_blas_available())
    out.push_back({cat(impl::gpu_blas_vendor(), " bf16 (", impl::gpu_blas_name(), ")"),
                   Precision::bfloat16, flops / library_bf16_seconds(space, n, a, b, reps) * 1e-9});
  set_bf16_gemm(Bf16Gemm::emulate);
  out.push_back({"emulated bf16 (rounded operands, fp32 gemm)", Precision::bfloat16,
                 rate(Precision::bfloat16)});
  return out;
}

MatmulRate fastest_matmul(const std::vector<MatmulRate>& rates, Precision precision) {
  MatmulRate best;
  for (const auto& r : rates)
    if ((r.precision == precision || r.precision == Precision::float32) && r.gflops > best.gflops)
      best = r;
  if (best.gflops <= 0)
    fail("mtk::kernels::fastest_matmul", cat("no measured rate for ", precision_name(precision)));
  return best;
}

MatmulRate matmul_ceiling(Precision precision) {
  static std::once_flag once;
  static std::vector<MatmulRate> rates;
  std::call_once(once, [] { rates = measure_matmul_rates(ExecSpace(), matmul_ceiling_size()); });
  return fastest_matmul(rates, precision);
}

}  // namespace mtk::kernels
