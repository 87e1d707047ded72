#include <mtk/data/impl/shard_checksums.hpp>

// Header-only xxHash (>= 0.8, cmake/MTKXxHash.cmake): nothing to link, nothing exported. GCC 12
// warns, wrongly, of uninitialized lanes in its AVX-512 intrinsics that XXH3 inlines here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace mtk::shard_checksums {

std::uint64_t xxh3_64(const void* data, std::size_t bytes) {
  return static_cast<std::uint64_t>(XXH3_64bits(data, bytes));
}

std::uint64_t legacy_header(const unsigned char* data, std::size_t n) {
  std::uint64_t h = 14695981039346656037ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Token i feeds lane i % 4; each step is a bijection of the lane for a given token and injective
// in the token, so one changed token always changes the sum.
std::uint64_t legacy_tokens(const std::int32_t* t, std::size_t n) {
  constexpr std::uint64_t kMul1 = 0x9E3779B97F4A7C15ull, kMul2 = 0xC2B2AE3D27D4EB4Full;
  std::uint64_t lane[4] = {1, 2, 3, 4};
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t& h = lane[i & 3];
    h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(t[i])) * kMul1;
    h = ((h << 29) | (h >> 35)) * kMul2;
  }
  std::uint64_t h = lane[0];
  for (int i = 1; i < 4; ++i)
    h = h * kMul2 ^ lane[i];
  return (h ^ static_cast<std::uint64_t>(n)) * kMul1;
}

}  // namespace mtk::shard_checksums
