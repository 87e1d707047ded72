// mtk::kernels halo kernels — see halo.hpp.
//
// A tensor is seen as [outer][d1][mid][d2][inner] where d1, d2 are the blocks dim and the block
// dim in the order they appear; Frame maps (outer, blocks, mid, block, inner) to offsets.

#include <mtk/base/error.hpp>
#include <mtk/kernels/halo.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>

namespace mtk::kernels {
namespace {

struct Frame {
  std::int64_t outer = 1, mid = 1, inner = 1;
  bool blocks_first = true;

  Frame(const Shape& s, int blocks_dim, int block_dim) : blocks_first(blocks_dim < block_dim) {
    const int lo = blocks_first ? blocks_dim : block_dim,
              hi = blocks_first ? block_dim : blocks_dim;
    for (int i = 0; i < s.rank(); ++i) {
      if (i < lo)
        outer *= s[i].size;
      else if (i > lo && i < hi)
        mid *= s[i].size;
      else if (i > hi)
        inner *= s[i].size;
    }
  }
  // The offset of (o, b, m, j, i) in a tensor of `nb` blocks of `nj` positions.
  KOKKOS_INLINE_FUNCTION std::int64_t at(std::int64_t o, std::int64_t b, std::int64_t m,
                                         std::int64_t j, std::int64_t i, std::int64_t nb,
                                         std::int64_t nj) const {
    return blocks_first ? (((o * nb + b) * mid + m) * nj + j) * inner + i
                        : (((o * nj + j) * mid + m) * nb + b) * inner + i;
  }
  // The inverse of at() without the inner position: line k of `inner` contiguous elements.
  KOKKOS_INLINE_FUNCTION void split_line(std::int64_t k, std::int64_t nb, std::int64_t nj,
                                         std::int64_t& o, std::int64_t& b, std::int64_t& m,
                                         std::int64_t& j) const {
    const std::int64_t n2 = blocks_first ? nj : nb, n1 = blocks_first ? nb : nj;
    const std::int64_t second = k % n2;
    k /= n2;
    m = k % mid;
    k /= mid;
    const std::int64_t first = k % n1;
    o = k / n1;
    b = blocks_first ? first : second;
    j = blocks_first ? second : first;
  }
  // The inverse of at().
  KOKKOS_INLINE_FUNCTION void split(std::int64_t k, std::int64_t nb, std::int64_t nj,
                                    std::int64_t& o, std::int64_t& b, std::int64_t& m,
                                    std::int64_t& j, std::int64_t& i) const {
    i = k % inner;
    split_line(k / inner, nb, nj, o, b, m, j);
  }
};

// line_body(line, o, b, m, j) for every line of `inner` contiguous elements of a tensor framed
// by f with `nb` blocks of `nj` positions, in order: a work item per chunk of runs of lines along
// the later of the two dims, its divisions once (per line they cost more than an 8-channel line's
// copy). Host only.
template <class LineBody>
void for_each_line(const char* label, const ExecSpace& space, const Frame& f, std::int64_t nb,
                   std::int64_t nj, const LineBody& line_body) {
  constexpr std::int64_t kChunk = 256;  // runs per work item
  const std::int64_t n2 = f.blocks_first ? nj : nb, n1 = f.blocks_first ? nb : nj;
  const std::int64_t runs = f.outer * n1 * f.mid, chunks = (runs + kChunk - 1) / kChunk;
  Kokkos::parallel_for(
      label, impl::Range(space, 0, chunks), KOKKOS_LAMBDA(std::int64_t c) {
        const std::int64_t begin = c * kChunk, end = begin + kChunk < runs ? begin + kChunk : runs;
        std::int64_t m = begin % f.mid, first = begin / f.mid % n1, o = begin / f.mid / n1;
        for (std::int64_t run = begin; run < end; ++run) {
          for (std::int64_t second = 0; second < n2; ++second)
            line_body(run * n2 + second, o, f.blocks_first ? first : second, m,
                      f.blocks_first ? second : first);
          if (++m == f.mid) {
            m = 0;
            if (++first == n1) {
              first = 0;
              ++o;
            }
          }
        }
      });
}

// body(k, o, b, m, j, i) for every element k of a tensor framed by f with `nb` blocks of `nj`
// positions, one element per thread: the GPU form of the kernels (the host's copy lines).
template <class Body>
void for_each_element(const char* label, const ExecSpace& space, const Frame& f, std::int64_t nb,
                      std::int64_t nj, const Body& body) {
  Kokkos::parallel_for(
      label, impl::Range(space, 0, f.outer * nb * f.mid * nj * f.inner),
      KOKKOS_LAMBDA(std::int64_t k) {
        std::int64_t o, b, m, j, i;
        f.split(k, nb, nj, o, b, m, j, i);
        body(k, o, b, m, j, i);
      });
}

// Whether the host forms run: on host spaces unless a test forces the GPU forms (device_paths).
[[maybe_unused]] inline bool host_lines() {
  if constexpr (impl::host_exec)
    return !impl::device_paths();
  return false;
}

// dst(to(o, b, m, j) + i) = src(from(o, b, m, j) + i) for every line (o, b, m, j) of a tensor
// framed by f with `nb` blocks of `nj` positions and every i < f.inner: a strip packed or placed.
// On the host a contiguous copy per line (the exchanges' own work, which no overlap hides).
template <class T, class To, class From>
void copy_lines(const char* label, const ExecSpace& space, const Frame& f, std::int64_t nb,
                std::int64_t nj, const View<T>& dst, const To& to, const View<T>& src,
                const From& from) {
  if constexpr (impl::host_exec) {
    if (host_lines()) {
      const std::int64_t inner = f.inner;
      for_each_line(
          label, space, f, nb, nj,
          [&](std::int64_t, std::int64_t o, std::int64_t b, std::int64_t m, std::int64_t j) {
            const T* s = src.data() + from(o, b, m, j);
            T* d = dst.data() + to(o, b, m, j);
            for (std::int64_t i = 0; i < inner; ++i)
              d[i] = s[i];
          });
      return;
    }
  }
  for_each_element(
      label, space, f, nb, nj,
      KOKKOS_LAMBDA(std::int64_t, std::int64_t o, std::int64_t b, std::int64_t m, std::int64_t j,
                    std::int64_t i) { dst(to(o, b, m, j) + i) = src(from(o, b, m, j) + i); });
}

void check(const char* where, const Shape& s, std::int64_t elements, int blocks_dim,
           int block_dim) {
  if (blocks_dim < 0 || block_dim < 0 || blocks_dim >= s.rank() || block_dim >= s.rank() ||
      blocks_dim == block_dim)
    fail(where,
         cat("dims ", blocks_dim, " and ", block_dim, " do not name two dims of ", s.to_string()));
  if (elements != s.num_elements())
    fail(where, cat("buffer holds ", elements, " elements but its shape ", s.to_string(), " has ",
                    s.num_elements()));
}

}  // namespace

template <class T>
void halo_strip_into(const ExecSpace& space, const Shape& shape, const View<T>& x, int blocks_dim,
                     int block_dim, std::int64_t block, std::int64_t begin, std::int64_t width,
                     const View<T>& out) {
  const char* w = "mtk::kernels::halo_strip";
  check(w, shape, static_cast<std::int64_t>(x.extent(0)), blocks_dim, block_dim);
  const std::int64_t nb = shape[blocks_dim].size, nj = shape[block_dim].size;
  if (block < 0 || block >= nb || begin < 0 || width < 0 || begin + width > nj)
    fail(w, cat("block ", block, " positions [", begin, ", ", begin + width, ") outside ",
                shape.to_string()));
  const Frame f(shape, blocks_dim, block_dim);
  if (static_cast<std::int64_t>(out.extent(0)) != f.outer * f.mid * f.inner * width)
    fail(w, cat("a strip of ", out.extent(0), " elements for ", width, " positions of blocks of ",
                shape.to_string()));
  copy_lines(
      w, space, f, 1, width, out,
      KOKKOS_LAMBDA(std::int64_t o, std::int64_t, std::int64_t m, std::int64_t j) {
        return f.at(o, 0, m, j, 0, 1, width);  // the strip: one block of `width` positions
      },
      x,
      KOKKOS_LAMBDA(std::int64_t o, std::int64_t, std::int64_t m, std::int64_t j) {
        return f.at(o, block, m, begin + j, 0, nb, nj);
      });
}

template <class T>
View<T> halo_strip(const ExecSpace& space, const Shape& shape, const View<T>& x, int blocks_dim,
                   int block_dim, std::int64_t block, std::int64_t begin, std::int64_t width) {
  check("mtk::kernels::halo_strip", shape, static_cast<std::int64_t>(x.extent(0)), blocks_dim,
        block_dim);
  const Frame f(shape, blocks_dim, block_dim);
  auto out = impl::alloc<T>("mtk::kernels::halo_strip",
                            std::max<std::int64_t>(0, f.outer * f.mid * f.inner * width));
  halo_strip_into(space, shape, x, blocks_dim, block_dim, block, begin, width, out);
  return out;
}

namespace {

// halo_assemble on the host: each line of the result copied whole from x or a strip.
template <class T>
void assemble_lines(const char* w, const ExecSpace& space, const Frame& f, std::int64_t nb,
                    std::int64_t n, std::int64_t left, std::int64_t right, const View<T>& x,
                    const View<T>& from_left, const View<T>& from_right, const View<T>& out) {
  const T *xs = x.data(), *ls = from_left.data(), *rs = from_right.data();
  T* ys = out.data();
  const std::int64_t inner = f.inner;
  for_each_line(
      w, space, f, nb, n + left + right,
      [=](std::int64_t line, std::int64_t o, std::int64_t b, std::int64_t m, std::int64_t j) {
        const std::int64_t g = j - left;
        const T* s;
        if (g >= 0 && g < n)
          s = xs + f.at(o, b, m, g, 0, nb, n);
        else if (g < 0)
          s = b > 0 ? xs + f.at(o, b - 1, m, n + g, 0, nb, n)
                    : ls + f.at(o, 0, m, left + g, 0, 1, left);
        else
          s = b + 1 < nb ? xs + f.at(o, b + 1, m, g - n, 0, nb, n)
                         : rs + f.at(o, 0, m, g - n, 0, 1, right);
        T* d = ys + line * inner;
        for (std::int64_t i = 0; i < inner; ++i)
          d[i] = s[i];
      });
}

}  // namespace

template <class T>
View<T> halo_assemble(const ExecSpace& space, const Shape& shape, const View<T>& x, int blocks_dim,
                      int block_dim, const View<T>& from_left, const View<T>& from_right,
                      std::int64_t left, std::int64_t right) {
  const char* w = "mtk::kernels::halo_assemble";
  check(w, shape, static_cast<std::int64_t>(x.extent(0)), blocks_dim, block_dim);
  const std::int64_t nb = shape[blocks_dim].size, n = shape[block_dim].size, m2 = n + left + right;
  if (left < 0 || right < 0 || left > n || right > n)
    fail(w, cat("halo (", left, ", ", right, ") wider than the blocks of ", shape.to_string()));
  const Frame f(shape, blocks_dim, block_dim);
  const std::int64_t strip = f.outer * f.mid * f.inner;
  if (static_cast<std::int64_t>(from_left.extent(0)) != strip * left ||
      static_cast<std::int64_t>(from_right.extent(0)) != strip * right)
    fail(w, cat("halo strips of ", from_left.extent(0), " and ", from_right.extent(0),
                " elements do not fit ", shape.to_string()));
  const std::int64_t total = strip * nb * m2;
  auto out = impl::alloc<T>(w, total);
  if constexpr (impl::host_exec) {
    if (host_lines()) {
      assemble_lines(w, space, f, nb, n, left, right, x, from_left, from_right, out);
      return out;
    }
  }
  for_each_element(
      w, space, f, nb, m2,
      KOKKOS_LAMBDA(std::int64_t k, std::int64_t o, std::int64_t b, std::int64_t m, std::int64_t j,
                    std::int64_t i) {
        const std::int64_t g = j - left;
        T v;
        if (g >= 0 && g < n)
          v = x(f.at(o, b, m, g, i, nb, n));
        else if (g < 0)
          v = b > 0 ? x(f.at(o, b - 1, m, n + g, i, nb, n))
                    : from_left(f.at(o, 0, m, left + g, i, 1, left));
        else
          v = b + 1 < nb ? x(f.at(o, b + 1, m, g - n, i, nb, n))
                         : from_right(f.at(o, 0, m, g - n, i, 1, right));
        out(k) = v;
      });
  return out;
}

namespace {

// halo_fold's value at (o, b, m, j, i) of the result: its own gradient, then the right halo of the
// block before, then the left halo of the block after (the strips for the end blocks).
template <class T>
struct Fold {
  Frame f;
  View<T> dy, from_left, from_right;
  std::int64_t nb, n, m2, left, right;

  KOKKOS_INLINE_FUNCTION T value(std::int64_t o, std::int64_t b, std::int64_t m, std::int64_t j,
                                 std::int64_t i) const {
    T v = dy(f.at(o, b, m, j + left, i, nb, m2));
    if (j < right)
      v += b > 0 ? dy(f.at(o, b - 1, m, n + left + j, i, nb, m2))
                 : from_left(f.at(o, 0, m, j, i, 1, right));
    if (j >= n - left)
      v += b + 1 < nb ? dy(f.at(o, b + 1, m, j - (n - left), i, nb, m2))
                      : from_right(f.at(o, 0, m, j - (n - left), i, 1, left));
    return v;
  }
};

template <class T>
Fold<T> make_fold(const char* w, const Shape& shape, const View<T>& dy, int blocks_dim,
                  int block_dim, const View<T>& from_left, const View<T>& from_right,
                  std::int64_t left, std::int64_t right) {
  check(w, shape, static_cast<std::int64_t>(dy.extent(0)), blocks_dim, block_dim);
  const std::int64_t nb = shape[blocks_dim].size, m2 = shape[block_dim].size, n = m2 - left - right;
  if (left < 0 || right < 0 || left > n || right > n)
    fail(w, cat("halo (", left, ", ", right, ") wider than the blocks of ", shape.to_string()));
  const Frame f(shape, blocks_dim, block_dim);
  const std::int64_t strip = f.outer * f.mid * f.inner;
  if (static_cast<std::int64_t>(from_left.extent(0)) != strip * right ||
      static_cast<std::int64_t>(from_right.extent(0)) != strip * left)
    fail(w, cat("halo strips of ", from_left.extent(0), " and ", from_right.extent(0),
                " elements do not fit ", shape.to_string()));
  return Fold<T>{f, dy, from_left, from_right, nb, n, m2, left, right};
}

// dst = own (+ a) (+ c), a line of `inner` elements, in Fold::value's order; a, c may be null.
template <class T>
inline void add_line(T* dst, const T* own, const T* a, const T* c, std::int64_t inner) {
  if (a != nullptr && c != nullptr)
    for (std::int64_t i = 0; i < inner; ++i)
      dst[i] = own[i] + a[i] + c[i];
  else if (a != nullptr || c != nullptr) {
    const T* e = a != nullptr ? a : c;
    for (std::int64_t i = 0; i < inner; ++i)
      dst[i] = own[i] + e[i];
  } else
    for (std::int64_t i = 0; i < inner; ++i)
      dst[i] = own[i];
}

// fold_range on the host: a line at a time (add_line).
template <class T>
void fold_lines(const char* w, const ExecSpace& space, const Fold<T>& fold, const View<T>& out,
                std::int64_t b0, std::int64_t blocks, std::int64_t begin, std::int64_t width) {
  const std::int64_t nb = fold.nb, n = fold.n, m2 = fold.m2, left = fold.left, right = fold.right,
                     inner = fold.f.inner;
  const Frame f = fold.f;
  const T *dy = fold.dy.data(), *fl = fold.from_left.data(), *fr = fold.from_right.data();
  T* ys = out.data();
  for_each_line(
      w, space, f, blocks, width,
      [=](std::int64_t, std::int64_t o, std::int64_t bb, std::int64_t m, std::int64_t jj) {
        const std::int64_t b = b0 + bb, j = begin + jj;
        const T* a = nullptr;
        const T* c = nullptr;
        if (j < right)
          a = b > 0 ? dy + f.at(o, b - 1, m, n + left + j, 0, nb, m2)
                    : fl + f.at(o, 0, m, j, 0, 1, right);
        if (j >= n - left)
          c = b + 1 < nb ? dy + f.at(o, b + 1, m, j - (n - left), 0, nb, m2)
                         : fr + f.at(o, 0, m, j - (n - left), 0, 1, left);
        add_line(ys + f.at(o, b, m, j, 0, nb, n), dy + f.at(o, b, m, j + left, 0, nb, m2), a, c,
                 inner);
      });
}

// Positions [begin, begin + width) of blocks [b0, b0 + blocks) of the fold's result: their
// values. On the host a line at a time, elsewhere an element per thread.
template <class T>
void fold_range(const char* w, const ExecSpace& space, const Fold<T>& fold, const View<T>& out,
                std::int64_t b0, std::int64_t blocks, std::int64_t begin, std::int64_t width) {
  if (width <= 0 || blocks <= 0)
    return;
  if constexpr (impl::host_exec) {
    if (host_lines()) {
      fold_lines(w, space, fold, out, b0, blocks, begin, width);
      return;
    }
  }
  const std::int64_t nb = fold.nb, n = fold.n;
  const Frame f = fold.f;
  for_each_element(
      w, space, f, blocks, width,
      KOKKOS_LAMBDA(std::int64_t, std::int64_t o, std::int64_t bb, std::int64_t m, std::int64_t jj,
                    std::int64_t i) {
        const std::int64_t b = b0 + bb, j = begin + jj;
        out(f.at(o, b, m, j, i, nb, n)) = fold.value(o, b, m, j, i);
      });
}

}  // namespace

template <class T>
View<T> halo_fold(const ExecSpace& space, const Shape& shape, const View<T>& dy, int blocks_dim,
                  int block_dim, const View<T>& from_left, const View<T>& from_right,
                  std::int64_t left, std::int64_t right) {
  const char* w = "mtk::kernels::halo_fold";
  const Fold<T> fold =
      make_fold(w, shape, dy, blocks_dim, block_dim, from_left, from_right, left, right);
  auto out = impl::alloc<T>(w, fold.f.outer * fold.f.mid * fold.f.inner * fold.nb * fold.n);
  fold_range(w, space, fold, out, 0, fold.nb, 0, fold.n);
  return out;
}

template <class T>
void halo_fold_edges(const ExecSpace& space, const Shape& shape, const View<T>& dy, int blocks_dim,
                     int block_dim, const View<T>& from_left, const View<T>& from_right,
                     std::int64_t left, std::int64_t right, const View<T>& out) {
  const char* w = "mtk::kernels::halo_fold_edges";
  const Fold<T> fold =
      make_fold(w, shape, dy, blocks_dim, block_dim, from_left, from_right, left, right);
  const std::int64_t nb = fold.nb, n = fold.n;
  if (static_cast<std::int64_t>(out.extent(0)) != fold.f.outer * fold.f.mid * fold.f.inner * nb * n)
    fail(w, cat("a result of ", out.extent(0), " elements for the blocks of ", shape.to_string(),
                " less their halos"));
  fold_range(w, space, fold, out, 0, 1, 0, right);
  // The last block's left-halo positions, less those the first block's edge wrote (one block).
  const std::int64_t lo = std::max(n - left, nb == 1 ? right : std::int64_t(0));
  fold_range(w, space, fold, out, nb - 1, 1, lo, n - lo);
}

namespace {

// Writes `strip` of `width` positions to positions [at, at + width) of block `block`.
template <class T>
void put_strip(const char* w, const ExecSpace& space, const Frame& f, const View<T>& x,
               std::int64_t nb, std::int64_t nj, std::int64_t block, std::int64_t at,
               const View<T>& strip, std::int64_t width) {
  const std::int64_t total = f.outer * f.mid * f.inner * width;
  if (static_cast<std::int64_t>(strip.extent(0)) != total || at < 0 || at + width > nj)
    fail(w, cat("a strip of ", strip.extent(0), " elements for positions [", at, ", ", at + width,
                ") of blocks of ", nj, " (", total, " elements expected)"));
  copy_lines(
      w, space, f, 1, width, x,
      KOKKOS_LAMBDA(std::int64_t o, std::int64_t, std::int64_t m, std::int64_t j) {
        return f.at(o, block, m, at + j, 0, nb, nj);
      },
      strip,
      KOKKOS_LAMBDA(std::int64_t o, std::int64_t, std::int64_t m, std::int64_t j) {
        return f.at(o, 0, m, j, 0, 1, width);
      });
}

}  // namespace

template <class T>
void halo_place(const ExecSpace& space, const Shape& shape, const View<T>& y, int blocks_dim,
                int block_dim, const View<T>& from_left, const View<T>& from_right,
                std::int64_t left, std::int64_t right) {
  const char* w = "mtk::kernels::halo_place";
  check(w, shape, static_cast<std::int64_t>(y.extent(0)), blocks_dim, block_dim);
  const std::int64_t nb = shape[blocks_dim].size, m2 = shape[block_dim].size;
  const Frame f(shape, blocks_dim, block_dim);
  put_strip(w, space, f, y, nb, m2, 0, 0, from_left, left);
  put_strip(w, space, f, y, nb, m2, nb - 1, m2 - right, from_right, right);
}

#define MTK_HALO_INSTANTIATE(T)                                                                  \
  template View<T> halo_strip<T>(const ExecSpace&, const Shape&, const View<T>&, int, int,       \
                                 std::int64_t, std::int64_t, std::int64_t);                      \
  template void halo_strip_into<T>(const ExecSpace&, const Shape&, const View<T>&, int, int,     \
                                   std::int64_t, std::int64_t, std::int64_t, const View<T>&);    \
  template View<T> halo_assemble<T>(const ExecSpace&, const Shape&, const View<T>&, int, int,    \
                                    const View<T>&, const View<T>&, std::int64_t, std::int64_t); \
  template View<T> halo_fold<T>(const ExecSpace&, const Shape&, const View<T>&, int, int,        \
                                const View<T>&, const View<T>&, std::int64_t, std::int64_t);     \
  template void halo_fold_edges<T>(const ExecSpace&, const Shape&, const View<T>&, int, int,     \
                                   const View<T>&, const View<T>&, std::int64_t, std::int64_t,   \
                                   const View<T>&);                                              \
  template void halo_place<T>(const ExecSpace&, const Shape&, const View<T>&, int, int,          \
                              const View<T>&, const View<T>&, std::int64_t, std::int64_t);

MTK_HALO_INSTANTIATE(float)
MTK_HALO_INSTANTIATE(double)

}  // namespace mtk::kernels
