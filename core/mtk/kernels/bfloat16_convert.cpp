// Bulk bf16 conversions (bfloat16_convert.hpp): host loops per ISA, chosen once, run in blocks.
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>

#include <atomic>
#include <cstring>

// Per-ISA clones of the host loops where the compiler can target them (GCC or Clang on x86-64,
// never inside a CUDA or HIP compilation, whose host loops are not the hot path).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(__HIPCC__) && !defined(__NVCOMPILER)
#define MTK_BF16_ISA_CLONES 1
#define MTK_TARGET(isa) __attribute__((target(isa)))
#else
#define MTK_TARGET(isa)
#endif

namespace mtk::kernels {
namespace {

inline void bits_loop(const float* x, std::uint16_t* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = to_bfloat16_bits(x[i]);
}

inline void round_loop(const float* x, float* out, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t u = rounded_bfloat16_bits(x[i]);
    std::memcpy(out + i, &u, sizeof u);
  }
}

using BitsFn = void (*)(const float*, std::uint16_t*, std::int64_t);
using RoundFn = void (*)(const float*, float*, std::int64_t);

void bits_baseline(const float* x, std::uint16_t* out, std::int64_t n) {
  bits_loop(x, out, n);
}
void round_baseline(const float* x, float* out, std::int64_t n) {
  round_loop(x, out, n);
}
#if defined(MTK_BF16_ISA_CLONES)
MTK_TARGET("avx2") void bits_avx2(const float* x, std::uint16_t* out, std::int64_t n) {
  bits_loop(x, out, n);
}
MTK_TARGET("avx2") void round_avx2(const float* x, float* out, std::int64_t n) {
  round_loop(x, out, n);
}
MTK_TARGET("avx512f,avx512bw,avx512vl")
void bits_avx512(const float* x, std::uint16_t* out, std::int64_t n) {
  bits_loop(x, out, n);
}
MTK_TARGET("avx512f,avx512bw,avx512vl")
void round_avx512(const float* x, float* out, std::int64_t n) {
  round_loop(x, out, n);
}
#endif

Bf16ConvertIsa detect() {
#if defined(MTK_BF16_ISA_CLONES)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl"))
    return Bf16ConvertIsa::avx512bw;
  if (__builtin_cpu_supports("avx2"))
    return Bf16ConvertIsa::avx2;
#endif
  return Bf16ConvertIsa::baseline;
}

// The widest, detected once.
Bf16ConvertIsa widest() {
  static const Bf16ConvertIsa best = detect();
  return best;
}

std::atomic<int> g_forced{-1};

// The host loops of one ISA.
struct Loops {
  BitsFn bits;
  RoundFn round;
};

Loops loops(Bf16ConvertIsa isa) {
#if defined(MTK_BF16_ISA_CLONES)
  if (isa == Bf16ConvertIsa::avx512bw)
    return {bits_avx512, round_avx512};
  if (isa == Bf16ConvertIsa::avx2)
    return {bits_avx2, round_avx2};
#endif
  (void)isa;
  return {bits_baseline, round_baseline};
}

// Blocks of 16K elements (64 KiB of floats): large enough that a block's call costs nothing, small
// enough to spread over a host space's threads.
constexpr std::int64_t kBlock = 1 << 14;

template <class Space, class HostLoop, class DeviceBody>
void run(const Space& space, const char* label, std::int64_t n, HostLoop host, DeviceBody body) {
  if constexpr (Kokkos::SpaceAccessibility<Space, Kokkos::HostSpace>::accessible) {
    (void)body;
    Kokkos::parallel_for(label,
                         Kokkos::RangePolicy<Space, Kokkos::IndexType<std::int64_t>>(
                             space, 0, (n + kBlock - 1) / kBlock),
                         [=](std::int64_t b) {
                           const std::int64_t begin = b * kBlock;
                           host(begin, (n - begin < kBlock ? n - begin : kBlock));
                         });
  } else {
    (void)host;
    Kokkos::parallel_for(label, impl::Range(space, 0, n), body);
  }
}

}  // namespace

namespace impl {
void host_bfloat16_bits_run(const float* x, std::uint16_t* out, std::int64_t n) {
  loops(bf16_convert_isa()).bits(x, out, n);
}
}  // namespace impl

void convert_to_bfloat16_bits(const ExecSpace& space, const char* label, const float* x,
                              std::uint16_t* out, std::int64_t n) {
  const BitsFn fn = loops(bf16_convert_isa()).bits;
  run(
      space, label, n, [=](std::int64_t begin, std::int64_t m) { fn(x + begin, out + begin, m); },
      KOKKOS_LAMBDA(std::int64_t i) { out[i] = to_bfloat16_bits(x[i]); });
}

void round_values_to_bfloat16(const ExecSpace& space, const char* label, const float* x, float* out,
                              std::int64_t n) {
  const RoundFn fn = loops(bf16_convert_isa()).round;
  run(
      space, label, n, [=](std::int64_t begin, std::int64_t m) { fn(x + begin, out + begin, m); },
      KOKKOS_LAMBDA(std::int64_t i) { out[i] = round_to_bfloat16(x[i]); });
}

Bf16ConvertIsa bf16_convert_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced < 0 ? widest() : static_cast<Bf16ConvertIsa>(forced);
}

bool bf16_convert_isa_available(Bf16ConvertIsa isa) {
  return static_cast<int>(isa) <= static_cast<int>(widest());
}

void force_bf16_convert_isa(Bf16ConvertIsa isa) {
  if (!bf16_convert_isa_available(isa))
    fail("mtk::kernels::force_bf16_convert_isa",
         cat("this CPU or build cannot run the ", bf16_convert_isa_name(isa),
             " loops (widest available: ", bf16_convert_isa_name(widest()), ")"));
  g_forced.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void reset_bf16_convert_isa() {
  g_forced.store(-1, std::memory_order_relaxed);
}

std::string bf16_convert_isa_name(Bf16ConvertIsa isa) {
  switch (isa) {
    case Bf16ConvertIsa::avx512bw:
      return "avx512bw";
    case Bf16ConvertIsa::avx2:
      return "avx2";
    case Bf16ConvertIsa::baseline:
      break;
  }
  return "baseline";
}

}  // namespace mtk::kernels
