#pragma once
// A branch-free float exponential the compiler can vectorise (glibc's expf is a scalar call per
// element): Cody-Waite range reduction and the Cephes degree-6 polynomial, within 2 ulp of expf.
// Device-callable (arithmetic and bit casts only). The range checks compare the float's bits as
// integers and combine the results with masks: under the default -ftrapping-math GCC keeps float
// comparisons and selects as branches, and a loop with branches does not vectorise.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels::impl {

namespace fast_exp_impl {

union Bits {
  float f;
  std::int32_t i;
};

/// The float's bits as an int that orders like the float (NaNs beyond +-inf).
KOKKOS_INLINE_FUNCTION std::int32_t ordered(std::int32_t bits) {
  return bits ^ ((bits >> 31) & 0x7fffffff);
}

}  // namespace fast_exp_impl

/// An int that orders like float x (for max reductions the compiler vectorises; NaNs sort
/// beyond +-inf) and its inverse.
KOKKOS_INLINE_FUNCTION std::int32_t float_key(float x) {
  fast_exp_impl::Bits b;
  b.f = x;
  return fast_exp_impl::ordered(b.i);
}
KOKKOS_INLINE_FUNCTION float key_float(std::int32_t key) {
  fast_exp_impl::Bits b;
  b.i = fast_exp_impl::ordered(key);
  return b.f;
}

/// exp(x) for float x; results below 2.4e-38 (x < -86.6) are flushed to 0, x > 88.7228 gives inf,
/// NaN gives NaN.
KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
  using fast_exp_impl::Bits;
  constexpr std::int32_t lo = -1118647092;  // ordered(bits of -86.6f)
  constexpr std::int32_t hi = 1118925331;   // ordered(bits of 88.7228f)
  Bits in;
  in.f = x;
  const std::int32_t key = fast_exp_impl::ordered(in.i);
  const std::int32_t clamped = key < lo ? lo : (key > hi ? hi : key);  // integer min / max
  Bits c;
  c.i = fast_exp_impl::ordered(clamped);  // x clamped to [-86.6, 88.7228]
  const float xc = c.f;
  // n = round(x / ln 2) by the 1.5 * 2^23 trick (exact for |n| < 2^22; no roundps needed).
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  // r = x - n ln 2 with ln 2 split in two so that n * hi is exact.
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  // 2^n as 2^(n - 1) * 2 keeps the exponent field in 1..254 for n in -125..128.
  Bits scale;
  scale.i = (static_cast<std::int32_t>(n) + 126) * (1 << 23);
  Bits e;
  e.f = (y * scale.f) * 2.0f;
  // Masks (all ones where true) rather than selects, which GCC would turn into branches.
  const std::int32_t nan = -static_cast<std::int32_t>((in.i & 0x7fffffff) > 0x7f800000);
  const std::int32_t under = -static_cast<std::int32_t>(key < lo);
  const std::int32_t over = -static_cast<std::int32_t>(key > hi);
  e.i = (e.i & ~(under | over | nan)) | (0x7f800000 & over & ~nan) | (in.i & nan);
  return e.f;
}

}  // namespace mtk::kernels::impl
