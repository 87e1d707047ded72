#pragma once
// Bulk float32 -> bfloat16 conversions (round to nearest even, kernels/bfloat16.hpp) on the
// caller's execution space. On the host the loops run in blocks through the widest vector ISA the
// CPU has (AVX-512BW, AVX2, else the build's baseline), chosen once per process: the conversions
// feed every bf16 contraction, and with AMX's matmul the scalar loop (1.5 ns an element) cost as
// much as the products it fed. Integer arithmetic only: every ISA gives the same bits.
// (kernels/bfloat16_convert.cpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/view.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace mtk::kernels {

namespace impl {
/// The host loop of the ISA in use over one run of values (bf16_bits_run).
void host_bfloat16_bits_run(const float* x, std::uint16_t* out, std::int64_t n);
}  // namespace impl

/// Inside a kernel: out[i] = to_bfloat16_bits(x[i]) for one thread's run of n values (a row in
/// cache), through the host's vector loop on the host.
KOKKOS_INLINE_FUNCTION void bf16_bits_run(const float* x, std::uint16_t* out, std::int64_t n) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || defined(__SYCL_DEVICE_ONLY__)
  for (std::int64_t i = 0; i < n; ++i)
    out[i] = to_bfloat16_bits(x[i]);
#else
  impl::host_bfloat16_bits_run(x, out, n);
#endif
}

/// The host loops' instruction sets, widest last.
enum class Bf16ConvertIsa { baseline, avx2, avx512bw };

/// out[i] = the bf16 bit pattern of x[i], i < n (to_bfloat16_bits), in a kernel labelled `label`.
void convert_to_bfloat16_bits(const ExecSpace& space, const char* label, const float* x,
                              std::uint16_t* out, std::int64_t n);
/// out[i] = x[i] rounded to the nearest bf16 value, as a float (round_to_bfloat16); out may be x.
void round_values_to_bfloat16(const ExecSpace& space, const char* label, const float* x, float* out,
                              std::int64_t n);

/// The ISA the host loops use now: the widest this CPU and build have, or the forced one.
Bf16ConvertIsa bf16_convert_isa();
/// Whether this CPU and build can run `isa`'s loops.
bool bf16_convert_isa_available(Bf16ConvertIsa isa);
/// Forces the host loops onto `isa` (tests: every path on every CPU); fails where unavailable.
void force_bf16_convert_isa(Bf16ConvertIsa isa);
/// Back to the widest available.
void reset_bf16_convert_isa();
/// "avx512bw", "avx2" or "baseline".
std::string bf16_convert_isa_name(Bf16ConvertIsa isa);

}  // namespace mtk::kernels
