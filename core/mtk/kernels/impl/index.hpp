#pragma once
// Device-side shape arithmetic for kernels: a small fixed-capacity shape that can be captured by
// value in KOKKOS_LAMBDAs (no std::vector on the device).

#include <mtk/base/error.hpp>
#include <mtk/base/shape.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels {

constexpr int max_rank = 8;

using mtk::Around;

/// a / b and a % b (a >= 0, b > 0), in 32 bits where both fit: a 64-bit division is a long
/// emulated sequence on GPUs, and the per-element kernels divide once or twice per element.
KOKKOS_INLINE_FUNCTION std::int64_t fast_div(std::int64_t a, std::int64_t b) {
  if (a <= 0xffffffffLL && b <= 0xffffffffLL)
    return static_cast<std::uint32_t>(a) / static_cast<std::uint32_t>(b);
  return a / b;
}
KOKKOS_INLINE_FUNCTION std::int64_t fast_mod(std::int64_t a, std::int64_t b) {
  if (a <= 0xffffffffLL && b <= 0xffffffffLL)
    return static_cast<std::uint32_t>(a) % static_cast<std::uint32_t>(b);
  return a % b;
}

/// Extents plus per-dim strides into some buffer (0 for a broadcast dim).
struct IndexMap {
  int rank = 0;
  std::int64_t extent[max_rank] = {};
  std::int64_t stride[max_rank] = {};

  /// Offset into the mapped buffer of the element with row-major position `k` over `extent`.
  KOKKOS_INLINE_FUNCTION std::int64_t offset(std::int64_t k) const {
    std::int64_t off = 0;
    if (k <= 0xffffffffLL) {
      // 32-bit division where k fits (nearly always): a 64-bit one is a long emulated sequence on
      // GPUs (3-5x the time of a transposed copy) and slower on several CPUs. The same offsets.
      auto k32 = static_cast<std::uint32_t>(k);
      for (int i = rank - 1; i >= 0; --i) {
        std::uint32_t c = k32;
        if (extent[i] <= 0xffffffffLL) {
          const auto e = static_cast<std::uint32_t>(extent[i]);
          c = k32 % e;
          k32 /= e;
        } else {
          k32 = 0;  // k < extent: all of k is this dim's coordinate
        }
        off += static_cast<std::int64_t>(c) * stride[i];
      }
      return off;
    }
    for (int i = rank - 1; i >= 0; --i) {
      std::int64_t c = k % extent[i];
      k /= extent[i];
      off += c * stride[i];
    }
    return off;
  }
};

/// Maps the elements of `out` (row-major) to offsets in a buffer of shape `in`, matching dims by
/// name; dims of `out` that `in` lacks get stride 0 (broadcast). Every dim of `in` must be in `out`
/// with the same size.
inline IndexMap map_by_name(const Shape& out, const Shape& in, const char* where) {
  if (out.rank() > max_rank)
    fail(where, cat("shape ", out.to_string(), " exceeds rank ", max_rank));
  IndexMap m;
  m.rank = out.rank();
  auto in_strides = in.strides();
  for (int i = 0; i < out.rank(); ++i) {
    m.extent[i] = out[i].size;
    int j = in.index_of(out[i].name);
    if (j >= 0 && in[j].size != out[i].size)
      fail(where, cat("dimension '", out[i].name, "' has size ", in[j].size, " in ", in.to_string(),
                      " but ", out[i].size, " in ", out.to_string()));
    m.stride[i] = j >= 0 ? in_strides[static_cast<size_t>(j)] : 0;
  }
  for (const auto& d : in.dims())
    if (!out.contains(d.name))
      fail(where, cat("dimension '", d.name, "' of ", in.to_string(), " is missing from ",
                      out.to_string()));
  return m;
}

}  // namespace mtk::kernels
