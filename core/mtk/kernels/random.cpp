// mtk::kernels random kernels — see random.hpp.
//
// Counter-based (kernels/impl/counter_random.hpp): the value of global element g is a pure
// function of (seed, g, draw counter), so any slicing of the global tensor yields the same numbers.

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/counter_random.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/random.hpp>

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace mtk::kernels {
namespace random_detail {

/// Uniform in [0, 1) from the top 24 bits (exactly representable as float).
KOKKOS_INLINE_FUNCTION float uniform01(std::uint64_t seed, std::uint64_t g, std::uint64_t counter) {
  return static_cast<float>(bits(seed, g, counter) >> 40) * (1.0f / 16777216.0f);
}

/// Standard normal by Box-Muller from the uniforms of draws 2c and 2c + 1.
KOKKOS_INLINE_FUNCTION float normal01(std::uint64_t seed, std::uint64_t g, std::uint64_t c) {
  const float u1 = 1.0f - uniform01(seed, g, 2 * c);  // (0, 1]: log is finite
  const float u2 = uniform01(seed, g, 2 * c + 1);
  return ::sqrtf(-2.0f * ::logf(u1)) * ::cosf(6.2831853071795864f * u2);
}

}  // namespace random_detail

namespace rd = random_detail;

FView random_uniform(const ExecSpace& space, const Shape& global_shape, const Shape& local_shape,
                     const std::vector<std::int64_t>& origin, std::uint64_t seed, float low,
                     float high) {
  const char* w = "mtk::kernels::random_uniform";
  if (!(low <= high))
    fail(w, cat("empty range [", low, ", ", high, ")"));
  const rd::GlobalIndex gi = rd::global_index(w, global_shape, local_shape, origin);
  const std::int64_t n = local_shape.num_elements();
  auto out = impl::alloc<float>(w, n);
  const float scale = high - low;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
        float v = low + scale * rd::uniform01(seed, gi(k), 0);
        if (v >= high && high > low)
          v = ::nextafterf(high, low);  // rounding must not reach high
        out(k) = v;
      });
  return out;
}

FView random_normal(const ExecSpace& space, const Shape& global_shape, const Shape& local_shape,
                    const std::vector<std::int64_t>& origin, std::uint64_t seed, float mean,
                    float stddev, bool truncated) {
  const char* w = "mtk::kernels::random_normal";
  if (!(stddev >= 0.f))
    fail(w, cat("negative standard deviation ", stddev));
  const rd::GlobalIndex gi = rd::global_index(w, global_shape, local_shape, origin);
  const std::int64_t n = local_shape.num_elements();
  auto out = impl::alloc<float>(w, n);
  Kokkos::parallel_for(
      w, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
        const std::uint64_t g = gi(k);
        float z = rd::normal01(seed, g, 0);
        if (truncated) {
          // Redraw beyond 2 stddev (as tf.truncated_normal); P(|z| > 2)^32 ~ 1e-42, then clamp.
          for (std::uint64_t c = 1; c < 32 && ::fabsf(z) > 2.0f; ++c)
            z = rd::normal01(seed, g, c);
          z = z > 2.0f ? 2.0f : (z < -2.0f ? -2.0f : z);
        }
        out(k) = mean + stddev * z;
      });
  return out;
}

std::uint64_t hash_name(const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace mtk::kernels
