#pragma once
// bfloat16 rounding on host and device: what Precision::bfloat16 contractions do to their operands.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

namespace mtk::kernels {

/// The float32 bits of `x` rounded to the nearest bfloat16 (ties to even; the low 16 bits zero);
/// NaN stays NaN (quieted, the payload's top bits kept), and values beyond bfloat16's range round
/// to infinity as the hardware conversion does. Branch-free, so that loops over it vectorise.
KOKKOS_INLINE_FUNCTION std::uint32_t rounded_bfloat16_bits(float x) {
  std::uint32_t u = 0;
  memcpy(&u, &x, sizeof u);
  const std::uint32_t nearest = u + 0x7fffu + ((u >> 16) & 1u);
  const std::uint32_t quiet = u | 0x00400000u;
  return ((u & 0x7fffffffu) > 0x7f800000u ? quiet : nearest) & 0xffff0000u;
}

/// `x` rounded to the nearest bfloat16, returned as a float (rounded_bfloat16_bits).
KOKKOS_INLINE_FUNCTION float round_to_bfloat16(float x) {
  const std::uint32_t u = rounded_bfloat16_bits(x);
  float y = 0;
  memcpy(&y, &u, sizeof y);
  return y;
}

/// The top 16 bits of round_to_bfloat16(x): the bfloat16 bit pattern.
KOKKOS_INLINE_FUNCTION std::uint16_t to_bfloat16_bits(float x) {
  return static_cast<std::uint16_t>(rounded_bfloat16_bits(x) >> 16);
}

/// The float32 value of bfloat16 bit pattern `bits` (exact).
KOKKOS_INLINE_FUNCTION float from_bfloat16_bits(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float y = 0;
  memcpy(&y, &u, sizeof y);
  return y;
}

}  // namespace mtk::kernels
