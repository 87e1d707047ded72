// mtk::kernels patch kernels — see patches.hpp. PatchMap carries the geometry into the kernels
// by value (fixed capacity: no std::vector on the device).
//
// With the channels last (the last input dim not spatial: [batch, spatial..., channels]) every
// output position owns a [taps][channels] block of the patches: extract_patches copies each tap's
// contiguous channel vector from the input (its bounds tested once for all the channels),
// fold_patches on the host reads the blocks once, in order, adding each tap's channel vector
// where it came from (fold_sweep); elsewhere every input position gathers its taps (fold_gather).
// Other layouts take the general loops. Whatever the path, each input element sums its taps from
// T(0) in row-major tap order, so the results are the same bit for bit.

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/patches.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>

namespace mtk::kernels {
namespace {

constexpr int kMaxRank = 12, kMaxAxes = 3;
// The most taps whose offsets fold_sweep lists per block (more: fold_gather).
constexpr int kListed = 64;

struct PatchMap {
  int rank = 0, naxes = 0;
  std::int64_t out_extent[kMaxRank] = {};  // the patches' dims before the taps
  std::int64_t in_extent[kMaxRank] = {};
  std::int64_t in_stride[kMaxRank] = {};   // row-major strides of the input
  std::int64_t col_stride[kMaxRank] = {};  // the patches' strides of the input's dims
  std::int64_t channels = 1;   // channels last: the last dim's extent, after the taps; else 1
  int axis_of[kMaxRank] = {};  // -1, or the geometry of a spatial dim
  int dim[kMaxAxes] = {};
  std::int64_t taps[kMaxAxes] = {}, stride[kMaxAxes] = {}, dilation[kMaxAxes] = {},
               pad[kMaxAxes] = {}, out[kMaxAxes] = {};
  std::int64_t all_taps = 1;
  // Per geometry, padded to kMaxAxes with a single tap: the patches' stride of its output
  // position and of its tap.
  std::int64_t out_stride[kMaxAxes] = {}, tap_stride[kMaxAxes] = {};
  // Per geometry, padded likewise: the input's extent and stride of its dim (1 and 0 past naxes).
  std::int64_t in_size[kMaxAxes] = {}, in_step[kMaxAxes] = {};

  // Position `pos`, row-major over dims [0, end) of `extent`: its spatial coordinates (x) and
  // the offset, by `stride`, of its other dims.
  KOKKOS_INLINE_FUNCTION std::int64_t decode(std::int64_t pos, int end, const std::int64_t* extent,
                                             const std::int64_t* stride, std::int64_t* x) const {
    std::int64_t base = 0;
    for (int d = end - 1; d >= 0; --d) {
      const std::int64_t c = pos % extent[d];
      pos /= extent[d];
      if (axis_of[d] < 0)
        base += c * stride[d];
      else
        x[axis_of[d]] = c;
    }
    return base;
  }
  // An output position: its spatial coordinates and the input offset of its other dims.
  KOKKOS_INLINE_FUNCTION std::int64_t decode_out(std::int64_t pos, int end, std::int64_t* o) const {
    return decode(pos, end, out_extent, in_stride, o);
  }
  // An input position: its spatial coordinates and the patches offset of its other dims.
  KOKKOS_INLINE_FUNCTION std::int64_t decode_in(std::int64_t pos, int end, std::int64_t* i) const {
    return decode(pos, end, in_extent, col_stride, i);
  }

  // extract_patches: f(tap, inside, offset) for each tap of output position o (spatial
  // coordinates) in row-major tap order, with the input offset from the other dims' base
  // (meaningful where inside). Nested per geometry: no division per tap.
  template <class F>
  KOKKOS_INLINE_FUNCTION void visit_sources(const std::int64_t* o, std::int64_t base,
                                            const F& f) const {
    std::int64_t t = 0;
    for (std::int64_t t0 = 0; t0 < taps[0]; ++t0) {
      const std::int64_t i0 = o[0] * stride[0] + t0 * dilation[0] - pad[0];
      const bool in0 = i0 >= 0 && i0 < in_size[0];
      const std::int64_t off0 = base + i0 * in_step[0];
      for (std::int64_t t1 = 0; t1 < taps[1]; ++t1) {
        const std::int64_t i1 = o[1] * stride[1] + t1 * dilation[1] - pad[1];
        const bool in1 = in0 && i1 >= 0 && i1 < in_size[1];
        const std::int64_t off1 = off0 + i1 * in_step[1];
        for (std::int64_t t2 = 0; t2 < taps[2]; ++t2) {
          const std::int64_t i2 = o[2] * stride[2] + t2 * dilation[2] - pad[2];
          f(t++, in1 && i2 >= 0 && i2 < in_size[2], off1 + i2 * in_step[2]);
        }
      }
    }
  }

  // Whether input position i, read by tap t of geometry a, belongs to an output position (o).
  KOKKOS_INLINE_FUNCTION bool lands(int a, std::int64_t i, std::int64_t t, std::int64_t& o) const {
    const std::int64_t num = i + pad[a] - t * dilation[a];
    if (num < 0)
      return false;
    o = stride[a] == 1 ? num : num / stride[a];
    return o * stride[a] == num && o < out[a];
  }

  // fold_patches: f(offset) for each tap that reads input position i (spatial coordinates), in
  // row-major tap order, with its patches offset from the other dims' base (output position
  // o = (i + pad - t * dilation) / stride where that divides and lies in the output).
  template <class F>
  KOKKOS_INLINE_FUNCTION void visit_taps(const std::int64_t* i, const F& f) const {
    for (std::int64_t t0 = 0; t0 < taps[0]; ++t0) {
      std::int64_t o0 = 0;
      if (!lands(0, i[0], t0, o0))
        continue;
      const std::int64_t off0 = o0 * out_stride[0] + t0 * tap_stride[0];
      for (std::int64_t t1 = 0; t1 < taps[1]; ++t1) {
        std::int64_t o1 = 0;
        if (!lands(1, i[1], t1, o1))
          continue;
        const std::int64_t off1 = off0 + o1 * out_stride[1] + t1 * tap_stride[1];
        for (std::int64_t t2 = 0; t2 < taps[2]; ++t2) {
          std::int64_t o2 = 0;
          if (lands(2, i[2], t2, o2))
            f(off1 + o2 * out_stride[2] + t2 * tap_stride[2]);
        }
      }
    }
  }
};

PatchMap make_map(const char* where, const Shape& s, const std::vector<PatchGeometry>& axes) {
  const int naxes = static_cast<int>(axes.size());
  if (naxes < 1 || naxes > kMaxAxes || s.rank() + naxes > kMaxRank)
    fail(where, cat(naxes, " spatial dims of ", s.to_string(), ": 1 to ", kMaxAxes, " and at most ",
                    kMaxRank, " dims with the taps"));
  PatchMap m;
  m.rank = s.rank();
  m.naxes = naxes;
  for (int d = 0; d < s.rank(); ++d) {
    m.in_extent[d] = m.out_extent[d] = s[d].size;
    m.axis_of[d] = -1;
  }
  for (int a = 0; a < naxes; ++a) {
    const PatchGeometry& p = axes[static_cast<size_t>(a)];
    if (p.dim < 0 || p.dim >= s.rank() || m.axis_of[p.dim] >= 0 || p.taps < 1 || p.stride < 1 ||
        p.dilation < 1 || p.pad_before < 0 || p.out < 0)
      fail(where, cat("bad patch geometry for dim ", p.dim, " of ", s.to_string(), " (taps ",
                      p.taps, ", stride ", p.stride, ", dilation ", p.dilation, ", pad ",
                      p.pad_before, ", out ", p.out, ")"));
    m.axis_of[p.dim] = a;
    m.out_extent[p.dim] = p.out;
    m.dim[a] = p.dim;
    m.taps[a] = p.taps;
    m.stride[a] = p.stride;
    m.dilation[a] = p.dilation;
    m.pad[a] = p.pad_before;
    m.out[a] = p.out;
    m.all_taps *= p.taps;
  }
  // The patches: the input's dims (spatial ones resized), the taps before the last dim where it
  // holds the channels (ops/patches.hpp), else after it.
  const int last = s.rank() - 1;
  m.channels = m.axis_of[last] < 0 ? m.in_extent[last] : 1;
  std::int64_t in = 1, col = m.all_taps * m.channels;
  for (int d = last; d >= 0; --d) {
    m.in_stride[d] = in;
    in *= m.in_extent[d];
    if (d == last && m.axis_of[last] < 0) {
      m.col_stride[d] = 1;
      continue;
    }
    m.col_stride[d] = col;
    col *= m.out_extent[d];
  }
  std::int64_t tap = m.channels;
  for (int a = kMaxAxes - 1; a >= 0; --a) {
    if (a >= naxes) {  // a single tap reading position 0
      m.taps[a] = m.stride[a] = m.dilation[a] = m.out[a] = m.in_size[a] = 1;
      continue;
    }
    m.in_size[a] = m.in_extent[m.dim[a]];
    m.in_step[a] = m.in_stride[m.dim[a]];
    m.out_stride[a] = m.col_stride[m.dim[a]];
    m.tap_stride[a] = tap;
    tap *= m.taps[a];
  }
  return m;
}

// extract_patches, channels last: a tap of an output position's block (at dst), the channel
// vector at x + from, or the pad value where from < 0. W > 0: `channels` is W (a copy the
// compiler unrolls into whole vectors).
template <int W, class T>
KOKKOS_INLINE_FUNCTION void put_tap(T* KOKKOS_RESTRICT dst, std::int64_t channels,
                                    const T* KOKKOS_RESTRICT x, std::int64_t from, T pad_value) {
  const std::int64_t n = W > 0 ? W : channels;
  if (from >= 0)
    for (std::int64_t c = 0; c < n; ++c)
      dst[c] = x[from + c];
  else
    for (std::int64_t c = 0; c < n; ++c)
      dst[c] = pad_value;
}

// Channels last: one work item per line of output positions along the dim before the channels
// (decoded once); each position's [taps][channels] block written tap by tap from contiguous
// channel vectors.
template <int W, class T>
void extract_lines(const char* w, const ExecSpace& space, const PatchMap& m, const T* x, T* out,
                   std::int64_t total, T pad_value) {
  const int run = m.rank - 2, axis = m.axis_of[run];
  const std::int64_t channels = m.in_extent[run + 1], block = channels * m.all_taps;
  const std::int64_t n = m.out_extent[run], step = axis < 0 ? m.in_stride[run] : 0;
  const std::int64_t lines = block * n > 0 ? total / (block * n) : 0;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, lines), KOKKOS_LAMBDA(std::int64_t line) {
        std::int64_t o[kMaxAxes] = {};
        std::int64_t base = m.decode_out(line, run, o);
        T* dst = out + line * n * block;
        for (std::int64_t j = 0; j < n; ++j, base += step, dst += block) {
          if (axis >= 0)
            o[axis] = j;
          m.visit_sources(o, base, [&](std::int64_t t, bool inside, std::int64_t off) {
            put_tap<W>(dst + t * channels, channels, x, inside ? off : -1, pad_value);
          });
        }
      });
}

// The usual channel counts with their copies unrolled.
template <class T>
void extract_channels_last(const char* w, const ExecSpace& space, const PatchMap& m, const T* x,
                           T* out, std::int64_t total, T pad_value) {
  switch (m.channels) {
    case 4:
      return extract_lines<4>(w, space, m, x, out, total, pad_value);
    case 8:
      return extract_lines<8>(w, space, m, x, out, total, pad_value);
    case 16:
      return extract_lines<16>(w, space, m, x, out, total, pad_value);
    case 32:
      return extract_lines<32>(w, space, m, x, out, total, pad_value);
    default:
      return extract_lines<0>(w, space, m, x, out, total, pad_value);
  }
}

// Any layout: one work item per row of all_taps entries (its position decoded once).
template <class T>
void extract_general(const char* w, const ExecSpace& space, const PatchMap& m, const T* x, T* out,
                     std::int64_t total, T pad_value) {
  const std::int64_t taps = m.all_taps;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, total / taps), KOKKOS_LAMBDA(std::int64_t row) {
        std::int64_t o[kMaxAxes] = {};
        const std::int64_t base = m.decode_out(row, m.rank, o);
        T* dst = out + row * taps;
        m.visit_sources(o, base, [&](std::int64_t t, bool inside, std::int64_t off) {
          dst[t] = inside ? x[off] : pad_value;
        });
      });
}

}  // namespace

template <class T>
View<T> extract_patches(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                        const std::vector<PatchGeometry>& axes, T pad_value) {
  const char* w = "mtk::kernels::extract_patches";
  if (static_cast<std::int64_t>(x.extent(0)) != in_shape.num_elements())
    fail(w, cat("buffer holds ", x.extent(0), " elements but its shape ", in_shape.to_string(),
                " has ", in_shape.num_elements()));
  const PatchMap m = make_map(w, in_shape, axes);
  std::int64_t total = m.all_taps;
  for (int d = 0; d < m.rank; ++d)
    total *= m.out_extent[d];
  auto out = impl::alloc<T>(w, total);
  if (m.axis_of[m.rank - 1] < 0)
    extract_channels_last(w, space, m, x.data(), out.data(), total, pad_value);
  else
    extract_general(w, space, m, x.data(), out.data(), total, pad_value);
  return out;
}

namespace {

// fold_sweep: the input offsets (from the slab's base) that the taps of block o add into, -1 for
// those outside [lo, hi) per geometry; `first` holds the offsets of a block's taps from its first.
[[maybe_unused]] KOKKOS_INLINE_FUNCTION void block_targets(const PatchMap& m, const std::int64_t* o,
                                                           const std::int64_t* lo,
                                                           const std::int64_t* hi,
                                                           const std::int64_t* first,
                                                           std::int64_t* to) {
  std::int64_t i[kMaxAxes], base = 0;
  bool whole = true;  // every tap inside
  for (int a = 0; a < kMaxAxes; ++a) {
    i[a] = o[a] * m.stride[a] - m.pad[a];
    base += i[a] * m.in_step[a];
    whole = whole && i[a] >= lo[a] && i[a] + (m.taps[a] - 1) * m.dilation[a] < hi[a];
  }
  std::int64_t t = 0;
  if (whole) {
    for (; t < m.all_taps; ++t)
      to[t] = base + first[t];
    return;
  }
  for (std::int64_t t0 = 0; t0 < m.taps[0]; ++t0) {
    const std::int64_t i0 = i[0] + t0 * m.dilation[0];
    const bool in0 = i0 >= lo[0] && i0 < hi[0];
    for (std::int64_t t1 = 0; t1 < m.taps[1]; ++t1) {
      const std::int64_t i1 = i[1] + t1 * m.dilation[1];
      const bool in1 = in0 && i1 >= lo[1] && i1 < hi[1];
      for (std::int64_t t2 = 0; t2 < m.taps[2]; ++t2, ++t) {
        const std::int64_t i2 = i[2] + t2 * m.dilation[2];
        to[t] = in1 && i2 >= lo[2] && i2 < hi[2]
                    ? i0 * m.in_step[0] + i1 * m.in_step[1] + i2 * m.in_step[2]
                    : -1;
      }
    }
  }
}

// fold_sweep: asks for the `bytes` at `elements` before blk to be fetched into the cache (no
// access: a block before the first asks for nothing that faults).
template <class T>
inline void prefetch_back(const T* blk, std::int64_t elements, std::int64_t bytes) {
#if defined(__GNUC__)
  const std::uintptr_t at =
      reinterpret_cast<std::uintptr_t>(blk) - static_cast<std::uintptr_t>(elements) * sizeof(T);
  for (std::int64_t b = 0; b < bytes; b += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(at + static_cast<std::uintptr_t>(b)));
#else
  (void)blk, (void)elements, (void)bytes;
#endif
}

// fold_sweep: adds the taps of one [taps][channels] block into y (tap t's channels at y + to[t],
// skipped where to[t] < 0). W > 0: `channels` is W.
template <int W, class T>
KOKKOS_INLINE_FUNCTION void add_block(const T* KOKKOS_RESTRICT blk, std::int64_t channels,
                                      std::int64_t taps, const std::int64_t* to,
                                      T* KOKKOS_RESTRICT y) {
  if (W > 0)
    channels = W;
  for (std::int64_t t = 0; t < taps; ++t) {
    if (to[t] < 0)
      continue;
    T* yr = y + to[t];
    const T* b = blk + t * channels;
    for (std::int64_t c = 0; c < channels; ++c)
      yr[c] += b[c];
  }
}

// Channels last, on the host: the patches read once, in order. One work item per `group`
// coordinates of geometry 0 (and per coordinate of the other dims that are not spatial): it
// zeroes its slab of the input, then sweeps the blocks that reach it from the last to the first
// (in geometry order) and adds each block's taps into the slab. An input element meets its taps'
// blocks in decreasing order of output position, that is in row-major order of the taps: the sums
// fold_gather makes, bit for bit. At most kListed taps.
template <int W, class T>
void fold_sweep(const char* w, const ExecSpace& space, const PatchMap& m, const T* p, T* out,
                std::int64_t total, std::int64_t group) {
  const int last = m.rank - 1;
  const std::int64_t channels = m.in_extent[last], taps = m.all_taps, n0 = m.in_size[0];
  const std::int64_t slab = channels * n0 * m.in_size[1] * m.in_size[2];
  const std::int64_t groups = (n0 + group - 1) / group;
  const std::int64_t items = slab > 0 ? total / slab * groups : 0;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, items), KOKKOS_LAMBDA(std::int64_t item) {
        std::int64_t ybase = 0, pbase = 0, r = item / groups;
        for (int d = last - 1; d >= 0; --d)
          if (m.axis_of[d] < 0) {
            const std::int64_t c = r % m.in_extent[d];
            r /= m.in_extent[d];
            ybase += c * m.in_stride[d];
            pbase += c * m.col_stride[d];
          }
        const std::int64_t lo[kMaxAxes] = {item % groups * group, 0, 0};
        const std::int64_t hi[kMaxAxes] = {lo[0] + group < n0 ? lo[0] + group : n0, m.in_size[1],
                                           m.in_size[2]};
        T* y = out + ybase;
        for (std::int64_t i0 = lo[0]; i0 < hi[0]; ++i0)
          for (std::int64_t i1 = 0; i1 < hi[1]; ++i1)
            for (std::int64_t i2 = 0; i2 < hi[2]; ++i2)
              for (std::int64_t c = 0; c < channels; ++c)
                y[i0 * m.in_step[0] + i1 * m.in_step[1] + i2 * m.in_step[2] + c] = T(0);
        std::int64_t first[kListed], to[kListed], o[kMaxAxes] = {}, t = 0;
        for (std::int64_t t0 = 0; t0 < m.taps[0]; ++t0)
          for (std::int64_t t1 = 0; t1 < m.taps[1]; ++t1)
            for (std::int64_t t2 = 0; t2 < m.taps[2]; ++t2)
              first[t++] = t0 * m.dilation[0] * m.in_step[0] + t1 * m.dilation[1] * m.in_step[1] +
                           t2 * m.dilation[2] * m.in_step[2];
        // The sweep runs backwards through the patches, which the prefetchers follow poorly
        // (3-4x slower than forwards from memory): the block `ahead` elements before is fetched.
        const std::int64_t ahead = 8 * m.out_stride[kMaxAxes - 1];
        const std::int64_t bytes = channels * taps * static_cast<std::int64_t>(sizeof(T));
        // The blocks along geometry 0 with a tap in [lo, hi): o * stride - pad + t * dilation.
        const std::int64_t from = lo[0] + m.pad[0] - (m.taps[0] - 1) * m.dilation[0];
        const std::int64_t top = (hi[0] - 1 + m.pad[0]) / m.stride[0];
        for (o[0] = top < m.out[0] ? top : m.out[0] - 1; o[0] >= 0 && o[0] * m.stride[0] >= from;
             --o[0])
          for (o[1] = m.out[1] - 1; o[1] >= 0; --o[1])
            for (o[2] = m.out[2] - 1; o[2] >= 0; --o[2]) {
              block_targets(m, o, lo, hi, first, to);
              const T* blk = p + pbase + o[0] * m.out_stride[0] + o[1] * m.out_stride[1] +
                             o[2] * m.out_stride[2];
              prefetch_back(blk, ahead, bytes);
              add_block<W>(blk, channels, taps, to, y);
            }
      });
}

// Channels last, elsewhere (and maps with more than kListed taps): one work item per line of
// input positions along the dim before the channels (decoded once); per position its channels
// four at a time, each summing its taps in its own register.
template <class T>
void fold_gather(const char* w, const ExecSpace& space, const PatchMap& m, const T* p, T* out,
                 std::int64_t total) {
  const int run = m.rank - 2, axis = m.axis_of[run];
  const std::int64_t channels = m.in_extent[run + 1], n = m.in_extent[run];
  const std::int64_t step = axis < 0 ? m.col_stride[run] : 0;
  const std::int64_t lines = channels * n > 0 ? total / (channels * n) : 0;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, lines), KOKKOS_LAMBDA(std::int64_t line) {
        std::int64_t i[kMaxAxes] = {};
        const T* src = p + m.decode_in(line, run, i);
        T* dst = out + line * n * channels;
        for (std::int64_t j = 0; j < n; ++j, src += step, dst += channels) {
          if (axis >= 0)
            i[axis] = j;
          std::int64_t c = 0;
          for (; c + 4 <= channels; c += 4) {
            const T* q = src + c;
            T s0 = T(0), s1 = T(0), s2 = T(0), s3 = T(0);
            m.visit_taps(i, [&](std::int64_t off) {
              s0 += q[off];
              s1 += q[off + 1];
              s2 += q[off + 2];
              s3 += q[off + 3];
            });
            dst[c] = s0;
            dst[c + 1] = s1;
            dst[c + 2] = s2;
            dst[c + 3] = s3;
          }
          for (; c < channels; ++c) {
            const T* q = src + c;
            T sum = T(0);
            m.visit_taps(i, [&](std::int64_t off) { sum += q[off]; });
            dst[c] = sum;
          }
        }
      });
}

// A spatial dim last: one work item per line of it (its position decoded once); each element
// sums its taps.
template <class T>
void fold_general(const char* w, const ExecSpace& space, const PatchMap& m, const T* p, T* out,
                  std::int64_t total) {
  const int last = m.rank - 1, axis = m.axis_of[last];
  const std::int64_t line = m.in_extent[last], lines = line > 0 ? total / line : 0;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, lines), KOKKOS_LAMBDA(std::int64_t row) {
        std::int64_t i[kMaxAxes] = {};
        const std::int64_t base = m.decode_in(row, last, i);
        T* dst = out + row * line;
        for (std::int64_t c = 0; c < line; ++c) {
          i[axis] = c;
          T sum = T(0);
          m.visit_taps(i, [&](std::int64_t off) { sum += p[base + off]; });
          dst[c] = sum;
        }
      });
}

}  // namespace

template <class T>
View<T> fold_patches(const ExecSpace& space, const Shape& in_shape, const View<T>& patches,
                     const std::vector<PatchGeometry>& axes) {
  const char* w = "mtk::kernels::fold_patches";
  const PatchMap m = make_map(w, in_shape, axes);
  std::int64_t cols = m.all_taps;
  for (int d = 0; d < m.rank; ++d)
    cols *= m.out_extent[d];
  if (static_cast<std::int64_t>(patches.extent(0)) != cols)
    fail(w, cat("patches hold ", patches.extent(0), " elements but the patches of ",
                in_shape.to_string(), " have ", cols));
  const std::int64_t total = in_shape.num_elements();
  auto out = impl::alloc<T>(w, total);
  if (m.axis_of[m.rank - 1] >= 0) {
    fold_general(w, space, m, patches.data(), out.data(), total);
    return out;
  }
  if constexpr (impl::host_exec) {
    if (m.all_taps <= kListed) {
      // As many groups of geometry 0's coordinates as the space runs work items at once (a block
      // that reaches two groups is read twice): on one thread, one sweep.
      const std::int64_t n0 = std::max<std::int64_t>(m.in_size[0], 1);
      const std::int64_t slab = m.in_extent[m.rank - 1] * n0 * m.in_size[1] * m.in_size[2];
      const std::int64_t outer = slab > 0 ? std::max<std::int64_t>(total / slab, 1) : 1;
      const std::int64_t parts = std::clamp<std::int64_t>(space.concurrency() / outer, 1, n0);
      const std::int64_t group = (n0 + parts - 1) / parts;
      switch (m.channels) {  // the usual channel counts with their adds unrolled
        case 4:
          fold_sweep<4>(w, space, m, patches.data(), out.data(), total, group);
          break;
        case 8:
          fold_sweep<8>(w, space, m, patches.data(), out.data(), total, group);
          break;
        case 32:
          fold_sweep<32>(w, space, m, patches.data(), out.data(), total, group);
          break;
        default:
          fold_sweep<0>(w, space, m, patches.data(), out.data(), total, group);
      }
      return out;
    }
  }
  fold_gather(w, space, m, patches.data(), out.data(), total);
  return out;
}

#define MTK_PATCHES_INSTANTIATE(T)                                                    \
  template View<T> extract_patches<T>(const ExecSpace&, const Shape&, const View<T>&, \
                                      const std::vector<PatchGeometry>&, T);          \
  template View<T> fold_patches<T>(const ExecSpace&, const Shape&, const View<T>&,    \
                                   const std::vector<PatchGeometry>&);

MTK_PATCHES_INSTANTIATE(float)
MTK_PATCHES_INSTANTIATE(double)

}  // namespace mtk::kernels
