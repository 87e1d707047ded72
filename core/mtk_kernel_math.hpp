#pragma once
// Math for kernels. fast_exp is expf without a library call on the host, so loops over rows of
// logits vectorise (the softmax and cross-entropy of a language model evaluate tens of millions of
// exponentials per step); on GPUs it is the device's expf.

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels {

/// exp(x) for float, within 2 ulp of expf over the whole range (0 below -87.3, +inf above 88.7).
KOKKOS_INLINE_FUNCTION float fast_exp(float x) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return ::expf(x);
#else
  if (!(x > -87.33654f))
    return x != x ? x : 0.0f;  // NaN stays NaN; underflow to 0
  if (x > 88.72283f)
    return __builtin_huge_valf();
  // x = n ln2 + r, |r| <= ln2 / 2; rounding by the 1.5 * 2^23 trick (no floorf call).
  const float t = x * 1.44269504088896341f;
  const float n = (t + 12582912.0f) - 12582912.0f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  // Cephes' minimax polynomial for exp(r) on [-ln2/2, ln2/2].
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n by building the float's exponent; n in [-126, 128] needs two steps at the ends.
  const std::int32_t ni = static_cast<std::int32_t>(n);
  union {
    std::int32_t i;
    float f;
  } a, b;
  a.i = ((ni >> 1) + 127) << 23;
  b.i = ((ni - (ni >> 1)) + 127) << 23;
  return p * a.f * b.f;
#endif
}

}  // namespace mtk::kernels
