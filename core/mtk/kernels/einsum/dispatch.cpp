// einsum's dispatch layer (impl/einsum_spec.hpp): which body multiplies a contraction, decided
// here only, from the precision, the build (host BLAS, oneDNN), the execution space and the
// switches (set_einsum_in_place / MTK_EINSUM_IN_PLACE, set_bf16_gemm / MTK_BF16_GEMM,
// set_fp32_gemm / MTK_FP32_GEMM).
#include <mtk/base/error.hpp>
#include <mtk/base/runtime_options.hpp>
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>

#include <atomic>
#include <string>

// OpenBLAS names the kernels it runs; weak, so that another BLAS links without it.
extern "C" char* openblas_get_corename() __attribute__((weak));

namespace mtk::kernels {
namespace einsum_impl {
namespace {

// Code-level overrides of the run-time options (tests, benchmarks): -1 / unset: the option.
std::atomic<int> g_in_place{-1};
std::atomic<bool> g_bf16_forced{false};
std::atomic<Bf16Gemm> g_bf16_path{Bf16Gemm::automatic};
std::atomic<bool> g_fp32_forced{false};
std::atomic<Fp32Gemm> g_fp32_path{Fp32Gemm::automatic};

bool in_place_enabled() {
  const int forced = g_in_place.load(std::memory_order_relaxed);
  return forced >= 0 ? forced != 0 : runtime_options().einsum_in_place();
}

Bf16Gemm requested_bf16_gemm() {
  if (g_bf16_forced.load(std::memory_order_relaxed))
    return g_bf16_path.load(std::memory_order_relaxed);
  const std::string& s = runtime_options().bf16_gemm();
  return s == "onednn"                      ? Bf16Gemm::onednn
         : s == "emulate"                   ? Bf16Gemm::emulate
         : s == "gpu_blas" || s == "cublas" ? Bf16Gemm::gpu_blas
                                            : Bf16Gemm::automatic;
}

Fp32Gemm requested_fp32_gemm() {
  if (g_fp32_forced.load(std::memory_order_relaxed))
    return g_fp32_path.load(std::memory_order_relaxed);
  const std::string& s = runtime_options().fp32_gemm();
  return s == "onednn" ? Fp32Gemm::onednn : s == "blas" ? Fp32Gemm::blas : Fp32Gemm::automatic;
}

// oneDNN's f32 matmul outruns the host BLAS where it runs its brgemm kernels (AVX-512: measured
// 1.7-2.3x OpenBLAS on the benchmark model's shapes, bench_einsum); its plain jit gemm (AVX2)
// does not, and without a host BLAS any kernel of oneDNN's but its reference code is the faster.
bool onednn_f32_is_faster() {
  if (!host_space || !impl::onednn_available())
    return false;
  const std::string impl = impl::onednn_f32_impl();
  return impl.rfind("brg", 0) == 0 || (!have_host_blas && !impl.empty() && impl.rfind("ref", 0));
}

bool onednn_is_native() {
  if (!impl::onednn_available() || !impl::onednn_has_bf16())
    return false;
  const std::string impl = impl::onednn_bf16_impl();
  return !impl.empty() && impl.rfind("ref", 0) != 0;
}

}  // namespace

Backend choose_backend(Precision precision) {
  if (impl::gpu_blas_available() && in_place_enabled())
    return Backend::gpu_blas_in_place;
  if (precision == Precision::bfloat16 && host_space && bf16_gemm() == Bf16Gemm::onednn)
    return Backend::onednn_in_place;
  if (precision == Precision::float32 && host_space && fp32_gemm() == Fp32Gemm::onednn)
    return Backend::onednn_in_place;
  if (have_host_blas && host_space && in_place_enabled())
    return Backend::host_blas_in_place;
  return Backend::packed_kokkos_gemm;
}

bool converts_bf16_operands(Backend backend) {
  if (backend == Backend::onednn_in_place)
    return true;
  return (backend == Backend::packed_kokkos_gemm || backend == Backend::gpu_blas_in_place) &&
         impl::gpu_blas_available() && bf16_gemm() == Bf16Gemm::gpu_blas;
}

FView contract(const ExecSpace& space, Backend backend, const Operand& a, const Operand& b,
               const Shape& out_shape, const Plan& plan, const Sizes& sizes, Precision precision,
               const Sources& sources, const FView& into) {
  switch (backend) {
    case Backend::host_blas_in_place:
      return host_blas_in_place(space, a, b, out_shape, plan, sizes, into);
    case Backend::onednn_in_place: {
      Operand x = a, y = b;
      FView out;
      // Under fp32 `automatic` only oneDNN's brgemm kernels are taken (see onednn_f32_is_faster).
      const bool only_brgemm =
          precision == Precision::float32 && requested_fp32_gemm() == Fp32Gemm::automatic;
      if (onednn_in_place(space, x, y, out_shape, plan, sizes, precision, only_brgemm, out, sources,
                          into))
        return out;
      // Declined: the operands as arranged, bf16 ones rounded, through the fp32 bodies (an
      // operand held only as its bf16 copy, still in place, made float32 again first).
      restore_gone_values(space, x, sources.reuse);
      restore_gone_values(space, y, sources.reuse);
      if (precision == Precision::bfloat16 && impl::onednn_has_bf16())
        round_operands_to_bf16(space, x, y);
      if (have_host_blas && in_place_enabled())
        return host_blas_in_place(space, x, y, out_shape, plan, sizes, into);
      return packed_gemm(space, x, y, out_shape, plan, sizes, into);
    }
    case Backend::gpu_blas_in_place:
      return gpu_blas_in_place(space, a, b, out_shape, plan, sizes, into,
                               precision == Precision::bfloat16 && converts_bf16_operands(backend),
                               sources);
    case Backend::packed_kokkos_gemm:
      break;
  }
  return packed_gemm(space, a, b, out_shape, plan, sizes, into,
                     precision == Precision::bfloat16 && converts_bf16_operands(backend));
}

}  // namespace einsum_impl

std::string host_blas_name() {
  if (!einsum_impl::have_host_blas)
    return "Kokkos Kernels' own gemm (no BLAS library)";
  if (openblas_get_corename)
    return cat("OpenBLAS (", openblas_get_corename(), " kernels)");
  return "the host BLAS";
}

void set_einsum_in_place(bool on) {
  einsum_impl::g_in_place.store(on ? 1 : 0, std::memory_order_relaxed);
}

void set_bf16_gemm(Bf16Gemm path) {
  if (path == Bf16Gemm::onednn && !impl::onednn_available())
    fail("mtk::kernels::set_bf16_gemm",
         "the oneDNN path was asked for but this MTK was built without oneDNN "
         "(MTK_ENABLE_ONEDNN; Debian package libdnnl-dev)");
  if (path == Bf16Gemm::gpu_blas && !impl::gpu_blas_available())
    fail("mtk::kernels::set_bf16_gemm",
         "the GPU BLAS path was asked for but this MTK does not run on a GPU with one (a build "
         "for Kokkos' CUDA space with Kokkos Kernels' cuBLAS, or its HIP space with rocBLAS: "
         "docs/building.md#cuda, #hip)");
  einsum_impl::g_bf16_path.store(path, std::memory_order_relaxed);
  einsum_impl::g_bf16_forced.store(true, std::memory_order_relaxed);
}

void set_fp32_gemm(Fp32Gemm path) {
  if (path == Fp32Gemm::onednn && !impl::onednn_available())
    fail("mtk::kernels::set_fp32_gemm",
         "the oneDNN path was asked for but this MTK was built without oneDNN "
         "(MTK_ENABLE_ONEDNN; Debian package libdnnl-dev)");
  einsum_impl::g_fp32_path.store(path, std::memory_order_relaxed);
  einsum_impl::g_fp32_forced.store(true, std::memory_order_relaxed);
}

void reset_fp32_gemm() {
  einsum_impl::g_fp32_forced.store(false, std::memory_order_relaxed);
}

void reset_bf16_gemm() {
  einsum_impl::g_bf16_forced.store(false, std::memory_order_relaxed);
}

Fp32Gemm fp32_gemm() {
  using namespace einsum_impl;
  const Fp32Gemm r = requested_fp32_gemm();
  if (r == Fp32Gemm::onednn && !impl::onednn_available())
    fail("mtk::kernels::einsum",
         "MTK_FP32_GEMM=onednn but this MTK was built without oneDNN (MTK_ENABLE_ONEDNN)");
  if (r == Fp32Gemm::onednn && !host_space)
    return Fp32Gemm::blas;
  if (r != Fp32Gemm::automatic)
    return r;
  return onednn_f32_is_faster() ? Fp32Gemm::onednn : Fp32Gemm::blas;
}

std::string fp32_gemm_description() {
  using namespace einsum_impl;
  const std::string blas = host_blas_name();
  if (impl::gpu_blas_available())
    return cat("cuBLAS sgemm, ",
               in_place_enabled() ? "operands in place (pointer-batched)" : "strided-batched", " (",
               impl::gpu_blas_name(), ")");
  if (!host_space)
    return "Kokkos Kernels gemm on this execution space";
  if (fp32_gemm() == Fp32Gemm::onednn)
    return cat("oneDNN f32 matmul (", impl::onednn_f32_impl(), ")",
               requested_fp32_gemm() == Fp32Gemm::automatic
                   ? cat("; products it has no brgemm kernel for: ", blas)
                   : std::string(": forced (MTK_FP32_GEMM=onednn)"));
  return cat(blas, impl::onednn_available() ? cat(" (oneDNN f32: ", impl::onednn_f32_impl(), ")")
                                            : std::string());
}

Bf16Gemm bf16_gemm() {
  using namespace einsum_impl;
  const Bf16Gemm r = requested_bf16_gemm();
  if (r == Bf16Gemm::onednn && !impl::onednn_available())
    fail("mtk::kernels::einsum",
         "MTK_BF16_GEMM=onednn but this MTK was built without oneDNN (MTK_ENABLE_ONEDNN)");
  if (r == Bf16Gemm::gpu_blas && !impl::gpu_blas_available())
    fail("mtk::kernels::einsum",
         "MTK_BF16_GEMM=gpu_blas but this MTK does not run on a GPU with cuBLAS or rocBLAS "
         "(docs/building.md#cuda, #hip)");
  if (r == Bf16Gemm::onednn && !host_space)
    return Bf16Gemm::emulate;  // oneDNN reads host memory only
  if (r != Bf16Gemm::automatic)
    return r;
  if (impl::gpu_blas_available())
    return Bf16Gemm::gpu_blas;
  return onednn_is_native() ? Bf16Gemm::onednn : Bf16Gemm::emulate;
}

bool bf16_gemm_is_emulated() {
  using namespace einsum_impl;
  if (impl::gpu_blas_available())
    return bf16_gemm() != Bf16Gemm::gpu_blas;
  return !host_space || bf16_gemm() == Bf16Gemm::emulate || !onednn_is_native();
}

bool bf16_copies_used() {
  using namespace einsum_impl;
  if (impl::gpu_blas_available())  // the in-place GPU BLAS body reads operands at their sources
    return bf16_gemm() == Bf16Gemm::gpu_blas && in_place_enabled();
  return host_space && bf16_gemm() == Bf16Gemm::onednn && onednn_is_native();
}

std::string bf16_gemm_description() {
  using namespace einsum_impl;
  const std::string chosen = impl::onednn_available() ? impl::onednn_bf16_impl() : "not built in";
  if (bf16_gemm() == Bf16Gemm::gpu_blas)
    return cat(impl::gpu_blas_vendor(), " bf16 matmul on the matrix cores, ",
               in_place_enabled() ? "operands in place (pointer-batched)" : "strided-batched", " (",
               impl::gpu_blas_name(), "); operands converted on the GPU");
  if (!host_space)
    return "emulated on this execution space: operands rounded to bf16, fp32 gemm";
  if (bf16_gemm() == Bf16Gemm::onednn && !impl::onednn_has_bf16())
    return cat("oneDNN f32 matmul on bf16-rounded operands (", chosen,
               "), slower than fp32: forced (MTK_BF16_GEMM=onednn)");
  if (bf16_gemm() == Bf16Gemm::onednn)
    return cat("oneDNN bf16 matmul (", chosen, ")",
               onednn_is_native() ? "" : ": oneDNN's reference code, slower than fp32",
               "; operands converted by the ", bf16_convert_isa_name(bf16_convert_isa()), " loops");
  return cat("emulated: operands rounded to bf16 and multiplied by the fp32 gemm (oneDNN: ", chosen,
             ")",
             onednn_is_native() ? "" : "; this CPU has no native bf16 matmul (avx512_bf16/amx)",
             ", slower than fp32");
}

}  // namespace mtk::kernels
