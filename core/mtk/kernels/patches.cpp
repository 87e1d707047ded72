// mtk::kernels patch kernels — see patches.hpp. PatchMap carries the geometry into the kernels
// by value (fixed capacity: no std::vector on the device).

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/patches.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels {
namespace {

constexpr int kMaxRank = 12, kMaxAxes = 3;

struct PatchMap {
  int rank = 0, naxes = 0;
  std::int64_t out_extent[kMaxRank] = {};  // the patches' dims before the taps
  std::int64_t in_extent[kMaxRank] = {};
  std::int64_t in_stride[kMaxRank] = {};   // row-major strides of the input
  std::int64_t col_stride[kMaxRank] = {};  // row-major strides of the patches (taps included)
  int axis_of[kMaxRank] = {};              // -1, or the geometry of a spatial dim
  int dim[kMaxAxes] = {};
  std::int64_t taps[kMaxAxes] = {}, stride[kMaxAxes] = {}, dilation[kMaxAxes] = {},
               pad[kMaxAxes] = {}, out[kMaxAxes] = {};
  std::int64_t all_taps = 1;
  // Per geometry, padded to kMaxAxes with a single tap: the patches' stride of its output
  // position and of its tap.
  std::int64_t out_stride[kMaxAxes] = {}, tap_stride[kMaxAxes] = {};

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
  std::int64_t in = 1, col = m.all_taps;
  for (int d = s.rank() - 1; d >= 0; --d) {
    m.in_stride[d] = in;
    m.col_stride[d] = col;
    in *= m.in_extent[d];
    col *= m.out_extent[d];
  }
  std::int64_t tap = 1;
  for (int a = kMaxAxes - 1; a >= 0; --a) {
    if (a >= naxes) {  // a single tap reading position 0
      m.taps[a] = m.stride[a] = m.dilation[a] = m.out[a] = 1;
      continue;
    }
    m.out_stride[a] = m.col_stride[m.dim[a]];
    m.tap_stride[a] = tap;
    tap *= m.taps[a];
  }
  return m;
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
  // One work item per output position (a row of all_taps entries): the position is decoded once.
  const std::int64_t rows = total / m.all_taps;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, rows), KOKKOS_LAMBDA(std::int64_t row) {
        std::int64_t o[kMaxAxes] = {}, base = 0, r = row;
        for (int d = m.rank - 1; d >= 0; --d) {
          const std::int64_t c = r % m.out_extent[d];
          r /= m.out_extent[d];
          if (m.axis_of[d] < 0)
            base += c * m.in_stride[d];
          else
            o[m.axis_of[d]] = c;
        }
        // The taps in row-major order, nested per geometry (no division per tap); geometries
        // past naxes have one tap reading position 0 (make_map).
        T* dst = &out(row * m.all_taps);
        for (std::int64_t t0 = 0; t0 < m.taps[0]; ++t0) {
          const std::int64_t i0 = o[0] * m.stride[0] + t0 * m.dilation[0] - m.pad[0];
          const bool in0 = i0 >= 0 && i0 < m.in_extent[m.dim[0]];
          const std::int64_t off0 = base + i0 * m.in_stride[m.dim[0]];
          for (std::int64_t t1 = 0; t1 < m.taps[1]; ++t1) {
            const std::int64_t i1 = o[1] * m.stride[1] + t1 * m.dilation[1] - m.pad[1];
            const bool in1 = in0 && (m.naxes < 2 || (i1 >= 0 && i1 < m.in_extent[m.dim[1]]));
            const std::int64_t off1 = m.naxes < 2 ? off0 : off0 + i1 * m.in_stride[m.dim[1]];
            for (std::int64_t t2 = 0; t2 < m.taps[2]; ++t2) {
              const std::int64_t i2 = o[2] * m.stride[2] + t2 * m.dilation[2] - m.pad[2];
              const bool in2 = in1 && (m.naxes < 3 || (i2 >= 0 && i2 < m.in_extent[m.dim[2]]));
              *dst++ = in2 ? x(m.naxes < 3 ? off1 : off1 + i2 * m.in_stride[m.dim[2]]) : pad_value;
            }
          }
        }
      });
  return out;
}

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
  // One work item per line of the last dim: its position decoded once (per element the division
  // chain cost more than the sum); each element sums its taps in row-major order either way.
  const int last = m.rank - 1;
  const std::int64_t line = m.in_extent[last], lines = line > 0 ? total / line : 0;
  Kokkos::parallel_for(
      w, impl::Range(space, 0, lines), KOKKOS_LAMBDA(std::int64_t row) {
        std::int64_t i[kMaxAxes] = {}, base = 0, r = row;
        for (int d = last - 1; d >= 0; --d) {
          const std::int64_t c = r % m.in_extent[d];
          r /= m.in_extent[d];
          if (m.axis_of[d] < 0)
            base += c * m.col_stride[d];
          else
            i[m.axis_of[d]] = c;
        }
        const std::int64_t first = row * line;
        if (m.axis_of[last] < 0) {  // a line of channels: each tap's test once for the line
          const std::int64_t cs = m.col_stride[last];
          for (std::int64_t c = 0; c < line; ++c)
            out(first + c) = T(0);
          m.visit_taps(i, [&](std::int64_t off) {
            for (std::int64_t c = 0; c < line; ++c)
              out(first + c) += patches(base + off + c * cs);
          });
          return;
        }
        for (std::int64_t c = 0; c < line; ++c) {
          i[m.axis_of[last]] = c;
          T sum = T(0);
          m.visit_taps(i, [&](std::int64_t off) { sum += patches(base + off); });
          out(first + c) = sum;
        }
      });
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
