#pragma once
// bfloat16 rounding on host and device: what Precision::bfloat16 contractions do to their operands.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <cstring>

namespace mtk::kernels {

/// `x` rounded to the nearest bfloat16 (ties to even), returned as a float; NaN stays NaN, and
/// values beyond bfloat16's range round to infinity as the hardware conversion does.
KOKKOS_INLINE_FUNCTION float round_to_bfloat16(float x) {
  std::uint32_t u = 0;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    u |= 0x00400000u;  // quiet NaN, payload's top bits kept
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
  }
  u &= 0xffff0000u;
  float y = 0;
  memcpy(&y, &u, sizeof y);
  return y;
}

/// The top 16 bits of round_to_bfloat16(x): the bfloat16 bit pattern.
KOKKOS_INLINE_FUNCTION std::uint16_t to_bfloat16_bits(float x) {
  const float r = round_to_bfloat16(x);
  std::uint32_t u = 0;
  memcpy(&u, &r, sizeof u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// The float32 value of bfloat16 bit pattern `bits` (exact).
KOKKOS_INLINE_FUNCTION float from_bfloat16_bits(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float y = 0;
  memcpy(&y, &u, sizeof y);
  return y;
}

}  // namespace mtk::kernels
