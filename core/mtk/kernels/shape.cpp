// mtk::kernels shape kernels — see shape.hpp.
//
// Kernels that move data without arithmetic: transpose and broadcast (by dimension name, through
// an IndexMap), and slice / concat / pad / shift along one dim, which factor the tensor as
// [outer][n][inner] around that dim.

#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/shape.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::kernels {
namespace layout_detail {

using Policy = Kokkos::RangePolicy<std::int64_t>;

using impl::alloc;

template <class T>
void check_buffer(const char* where, const Shape& shape, const View<T>& v) {
  if (static_cast<std::int64_t>(v.extent(0)) != shape.num_elements())
    fail(where, cat("buffer holds ", v.extent(0), " elements but its shape ", shape.to_string(),
                    " has ", shape.num_elements()));
}

void check_dim(const char* where, const Shape& shape, int dim) {
  if (dim < 0 || dim >= shape.rank())
    fail(where, cat("dim ", dim, " outside ", shape.to_string()));
}

Shape with_size(const Shape& s, int dim, std::int64_t size) {
  std::vector<Dimension> dims = s.dims();
  dims[static_cast<size_t>(dim)].size = size;
  return Shape(dims);
}

template <class T>
View<T> copy(const ExecSpace& space, const char* label, const View<T>& x) {
  auto out = alloc<T>(label, static_cast<std::int64_t>(x.extent(0)));
  Kokkos::parallel_for(
      label, Policy(space, 0, static_cast<std::int64_t>(x.extent(0))),
      KOKKOS_LAMBDA(std::int64_t k) { out(k) = x(k); });
  return out;
}

// On the host a row of out's last dim per work item: the offset decoded once per row (per element
// the division chain cost more than the copy), the row read at that dim's stride. Off the host a
// thread per element.
template <class T>
View<T> gather_by_map(const ExecSpace& space, const char* label, const View<T>& x,
                      const IndexMap& map, std::int64_t n) {
  auto out = alloc<T>(label, n);
  if (n == 0)
    return out;
  IndexMap rows = map;
  std::int64_t run = 1, step = 0;
  if (map.rank > 0) {
    rows.rank = map.rank - 1;
    run = map.extent[map.rank - 1];
    step = map.stride[map.rank - 1];
  }
  if (impl::device_paths()) {  // a thread per element: consecutive threads write consecutively
    Kokkos::parallel_for(
        label, Policy(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
          out(k) = x(rows.offset(fast_div(k, run)) + fast_mod(k, run) * step);
        });
    return out;
  }
  Kokkos::parallel_for(
      label, Policy(space, 0, n / run), KOKKOS_LAMBDA(std::int64_t r) {
        const std::int64_t src = rows.offset(r), dst = r * run;
        for (std::int64_t j = 0; j < run; ++j)
          out(dst + j) = x(src + j * step);
      });
  return out;
}

// body(k, o, j, i) for every element k = (o * m + j) * inner + i of an [outer][m][inner] tensor:
// on the host a row of `inner` contiguous elements at a time (the divisions once per row; per
// element they cost more than the copy), on GPUs one element per thread.
template <class Body>
void for_each_around(const char* label, const ExecSpace& space, std::int64_t outer, std::int64_t m,
                     std::int64_t inner, const Body& body) {
  if (!impl::device_paths()) {
    Kokkos::parallel_for(
        label, Policy(space, 0, outer * m), KOKKOS_LAMBDA(std::int64_t r) {
          const std::int64_t j = r % m, o = r / m;
          for (std::int64_t i = 0; i < inner; ++i)
            body(r * inner + i, o, j, i);
        });
  } else {
    Kokkos::parallel_for(
        label, Policy(space, 0, outer * m * inner), KOKKOS_LAMBDA(std::int64_t k) {
          const std::int64_t i = fast_mod(k, inner), r = fast_div(k, inner);
          body(k, fast_div(r, m), fast_mod(r, m), i);
        });
  }
}

/// Writes x ([outer][m][inner]) into out ([outer][n][inner]) at positions [begin, begin + m).
template <class T>
void place(const ExecSpace& space, const char* label, const View<T>& x, std::int64_t outer,
           std::int64_t m, std::int64_t inner, const View<T>& out, std::int64_t n,
           std::int64_t begin) {
  for_each_around(
      label, space, outer, m, inner,
      KOKKOS_LAMBDA(std::int64_t k, std::int64_t o, std::int64_t j, std::int64_t i) {
        out((o * n + begin + j) * inner + i) = x(k);
      });
}

}  // namespace layout_detail

namespace ld = layout_detail;

template <class T>
View<T> transpose(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                  const Shape& out_shape) {
  const char* w = "mtk::kernels::transpose";
  ld::check_buffer(w, in_shape, x);
  if (in_shape.rank() != out_shape.rank())
    fail(w, cat(out_shape.to_string(), " is not a reordering of ", in_shape.to_string()));
  const IndexMap map = map_by_name(out_shape, in_shape, w);
  if (in_shape == out_shape)
    return ld::copy(space, w, x);
  return ld::gather_by_map(space, w, x, map, out_shape.num_elements());
}

template <class T>
View<T> broadcast(const ExecSpace& space, const Shape& in_shape, const View<T>& x,
                  const Shape& out_shape) {
  const char* w = "mtk::kernels::broadcast";
  ld::check_buffer(w, in_shape, x);
  const IndexMap map = map_by_name(out_shape, in_shape, w);
  const std::int64_t n = out_shape.num_elements();
  if (in_shape == out_shape)
    return ld::copy(space, w, x);
  const int shift = out_shape.rank() - in_shape.rank();
  bool suffix = true, prefix = true;
  for (int i = 0; i < in_shape.rank(); ++i) {
    suffix = suffix && in_shape[i] == out_shape[i + shift];
    prefix = prefix && in_shape[i] == out_shape[i];
  }
  const std::int64_t m = in_shape.num_elements();
  if (prefix && !suffix && m > 0) {
    // in_shape is the leading dims of out_shape (a sum's gradient over trailing dims): each value
    // repeated r times, without the index map's divisions per element.
    const std::int64_t r = n / m;
    auto out = impl::alloc<T>(w, n);
    if (impl::device_paths()) {
      Kokkos::parallel_for(
          w, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) { out(k) = x(k / r); });
    } else {
      Kokkos::parallel_for(
          w, impl::Range(space, 0, m), KOKKOS_LAMBDA(std::int64_t i) {
            const T v = x(i);
            for (std::int64_t j = 0; j < r; ++j)
              out(i * r + j) = v;
          });
    }
    return out;
  }
  if (!suffix)
    return ld::gather_by_map(space, w, x, map, n);
  // in_shape is the trailing dims of out_shape: a tiled copy.
  auto out = impl::alloc<T>(w, n);
  Kokkos::parallel_for(
      w, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) { out(k) = x(k % m); });
  return out;
}

template <class T>
View<T> slice(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
              std::int64_t begin, std::int64_t size) {
  const char* w = "mtk::kernels::slice";
  ld::check_buffer(w, in_shape, x);
  ld::check_dim(w, in_shape, dim);
  const Around a(in_shape, dim);
  if (begin < 0 || size < 0 || begin + size > a.n)
    fail(w, cat("positions [", begin, ", ", begin + size, ") of dimension '", in_shape[dim].name,
                "' are outside ", in_shape.to_string()));
  const std::int64_t outer = a.outer, n = a.n, inner = a.inner, total = outer * size * inner;
  auto out = impl::alloc<T>(w, total);
  ld::for_each_around(
      w, space, outer, size, inner,
      KOKKOS_LAMBDA(std::int64_t k, std::int64_t o, std::int64_t j, std::int64_t i) {
        out(k) = x((o * n + begin + j) * inner + i);
      });
  return out;
}

template <class T>
View<T> concat(const ExecSpace& space, const std::vector<Shape>& shapes,
               const std::vector<View<T>>& xs, int dim) {
  const char* w = "mtk::kernels::concat";
  if (shapes.size() != xs.size())
    fail(w, cat(shapes.size(), " shapes but ", xs.size(), " buffers"));
  if (shapes.empty())
    fail(w, "nothing to concatenate");
  ld::check_dim(w, shapes[0], dim);
  std::int64_t n = 0;
  for (size_t p = 0; p < shapes.size(); ++p) {
    ld::check_buffer(w, shapes[p], xs[p]);
    bool fits = shapes[p].rank() == shapes[0].rank();
    for (int i = 0; fits && i < shapes[0].rank(); ++i)
      fits = shapes[p][i].name == shapes[0][i].name &&
             (i == dim || shapes[p][i].size == shapes[0][i].size);
    if (!fits)
      fail(w, cat("cannot concatenate ", shapes[p].to_string(), " with ", shapes[0].to_string(),
                  " along dimension '", shapes[0][dim].name, "'"));
    n += shapes[p][dim].size;
  }
  const Around a(shapes[0], dim);
  auto out = impl::alloc<T>(w, a.outer * n * a.inner);
  std::int64_t begin = 0;
  for (size_t p = 0; p < shapes.size(); ++p) {
    const std::int64_t m = shapes[p][dim].size;
    ld::place(space, w, xs[p], a.outer, m, a.inner, out, n, begin);
    begin += m;
  }
  return out;
}

template <class T>
View<T> pad(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
            std::int64_t before, std::int64_t after, T value) {
  const char* w = "mtk::kernels::pad";
  ld::check_buffer(w, in_shape, x);
  ld::check_dim(w, in_shape, dim);
  if (before < 0 || after < 0)
    fail(w, cat("negative padding (", before, ", ", after, ") of dimension '", in_shape[dim].name,
                "' in ", in_shape.to_string()));
  const Around a(in_shape, dim);
  const std::int64_t inner = a.inner, n = a.n, m = n + before + after, total = a.outer * m * inner;
  auto out = impl::alloc<T>(w, total);
  ld::for_each_around(
      w, space, a.outer, m, inner,
      KOKKOS_LAMBDA(std::int64_t k, std::int64_t o, std::int64_t jm, std::int64_t i) {
        const std::int64_t j = jm - before;
        out(k) = (j >= 0 && j < n) ? x((o * n + j) * inner + i) : value;
      });
  return out;
}

template <class T>
View<T> shift(const ExecSpace& space, const Shape& in_shape, const View<T>& x, int dim,
              std::int64_t offset, bool wrap) {
  const char* w = "mtk::kernels::shift";
  ld::check_buffer(w, in_shape, x);
  ld::check_dim(w, in_shape, dim);
  const Around a(in_shape, dim);
  const std::int64_t inner = a.inner, n = a.n, total = in_shape.num_elements();
  auto out = impl::alloc<T>(w, total);
  ld::for_each_around(
      w, space, a.outer, n, inner,
      KOKKOS_LAMBDA(std::int64_t k, std::int64_t o, std::int64_t j, std::int64_t i) {
        std::int64_t src = j - offset;
        if (wrap) {
          src %= n;
          if (src < 0)
            src += n;
        }
        out(k) = (src >= 0 && src < n) ? x((o * n + src) * inner + i) : T(0);
      });
  return out;
}

#define MTK_LAYOUT_INSTANTIATE(T)                                                              \
  template View<T> transpose<T>(const ExecSpace&, const Shape&, const View<T>&, const Shape&); \
  template View<T> broadcast<T>(const ExecSpace&, const Shape&, const View<T>&, const Shape&); \
  template View<T> slice<T>(const ExecSpace&, const Shape&, const View<T>&, int, std::int64_t, \
                            std::int64_t);                                                     \
  template View<T> concat<T>(const ExecSpace&, const std::vector<Shape>&,                      \
                             const std::vector<View<T>>&, int);                                \
  template View<T> pad<T>(const ExecSpace&, const Shape&, const View<T>&, int, std::int64_t,   \
                          std::int64_t, T);                                                    \
  template View<T> shift<T>(const ExecSpace&, const Shape&, const View<T>&, int, std::int64_t, \
                            bool);

MTK_LAYOUT_INSTANTIATE(float)
MTK_LAYOUT_INSTANTIATE(std::int32_t)
#undef MTK_LAYOUT_INSTANTIATE

}  // namespace mtk::kernels
