#pragma once
// The counter-based generator behind kernels/random.hpp and stochastic rounding
// (kernels/bfloat16_storage.hpp): the bits of global element g are a pure function of
// (seed, g, counter), hashed with splitmix64's finaliser, so any slicing of the global tensor
// (any mesh, layout, backend) draws the same bits.

#include <mtk/base/error.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/impl/index.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::kernels::random_detail {

/// splitmix64's finaliser: a bijective 64-bit mix with full avalanche.
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// 64 random bits for draw `counter` of element `g` under `seed`.
KOKKOS_INLINE_FUNCTION std::uint64_t bits(std::uint64_t seed, std::uint64_t g,
                                          std::uint64_t counter) {
  std::uint64_t h = mix64(seed);
  h = mix64(h ^ g);
  return mix64(h ^ (counter * 0xD6E8FEB86659FD93ull));
}

/// Maps the row-major position k in the local slice to the global row-major index.
struct GlobalIndex {
  int rank = 0;
  std::int64_t extent[max_rank] = {};         // local sizes
  std::int64_t origin[max_rank] = {};         // slice origin in the global tensor
  std::int64_t global_stride[max_rank] = {};  // row-major strides of the global shape

  KOKKOS_INLINE_FUNCTION std::uint64_t operator()(std::int64_t k) const {
    std::int64_t g = 0;
    for (int i = rank - 1; i >= 0; --i) {
      g += (k % extent[i] + origin[i]) * global_stride[i];
      k /= extent[i];
    }
    return static_cast<std::uint64_t>(g);
  }
};

/// The GlobalIndex of slice `local_shape` at `origin` in `global_shape`; fails (naming `where`)
/// when the slice does not fit.
inline GlobalIndex global_index(const char* where, const Shape& global_shape,
                                const Shape& local_shape, const std::vector<std::int64_t>& origin) {
  if (global_shape.rank() > max_rank)
    fail(where, cat("shape ", global_shape.to_string(), " exceeds rank ", max_rank));
  bool ok = local_shape.rank() == global_shape.rank() &&
            static_cast<int>(origin.size()) == global_shape.rank();
  for (int i = 0; ok && i < global_shape.rank(); ++i) {
    const auto o = origin[static_cast<size_t>(i)];
    ok = local_shape[i].name == global_shape[i].name && o >= 0 &&
         o + local_shape[i].size <= global_shape[i].size;
  }
  if (!ok) {
    std::string o = "(";
    for (size_t i = 0; i < origin.size(); ++i)
      o += (i ? ", " : "") + std::to_string(origin[i]);
    fail(where, cat("slice ", local_shape.to_string(), " at origin ", o, ") does not fit in ",
                    global_shape.to_string()));
  }
  GlobalIndex gi;
  gi.rank = global_shape.rank();
  const auto strides = global_shape.strides();
  for (int i = 0; i < gi.rank; ++i) {
    gi.extent[i] = local_shape[i].size;
    gi.origin[i] = origin[static_cast<size_t>(i)];
    gi.global_stride[i] = strides[static_cast<size_t>(i)];
  }
  return gi;
}

}  // namespace mtk::kernels::random_detail
