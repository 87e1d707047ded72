// mtk::kernels contractions: einsum over named dims, lowered to one KokkosBlas::gemm per batch
// index. See einsum.hpp for the contract.
//
// Two operands: dims of one input only and absent from out are summed first (reduce). The rest are
// batch (both inputs and out), M (a and out), N (b and out) and K (both inputs, not out). Each
// operand is used in place when its memory order is [batch][M][K] / [batch][K][M] (a) or
// [batch][K][N] / [batch][N][K] (b), as gemm's "N" / "T"; otherwise a transposed copy is made.
// The result is written straight into out when out's order is [batch][M][N], or [batch][N][M]
// (computing C^T = B^T A^T); otherwise into a temporary that is transposed into out.
//
// bfloat16: after the presums (float32), both operands are rounded to bf16 values once (kept as
// floats, in buffers reused from call to call on the host), so every path below (transposed copies,
// elementwise products, gemm) sees the same bf16 operands. The products then run through oneDNN's
// bf16 matmul (the bf16 conversion of bf16 values is exact) or, emulated, through the fp32 gemm:
// the same numbers up to the order of the float32 sums.
#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>
#include <mtk/kernels/kernels.hpp>

#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
#include <KokkosBlas_Host_tpl.hpp>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace mtk::kernels {
namespace detail::einsum_impl {

using Names = std::vector<std::string>;
using Mat = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::MemoryUnmanaged>;
using CMat = Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::MemoryUnmanaged>;

void check_size(const char* where, const Shape& s, const FView& v, const char* what) {
  if (static_cast<std::int64_t>(v.extent(0)) != s.num_elements())
    fail(where, cat(what, " holds ", v.extent(0), " elements but its shape ", s.to_string(),
                    " has ", s.num_elements()));
}

// Every name's size, checking that all shapes agree.
std::map<std::string, std::int64_t> sizes_of(const char* where,
                                             const std::vector<const Shape*>& shapes) {
  std::map<std::string, std::int64_t> sizes;
  std::map<std::string, const Shape*> first;
  for (const Shape* s : shapes)
    for (const auto& d : s->dims()) {
      auto it = sizes.find(d.name);
      if (it == sizes.end()) {
        sizes[d.name] = d.size;
        first[d.name] = s;
      } else if (it->second != d.size) {
        fail(where, cat("dimension '", d.name, "' has size ", it->second, " in ",
                        first[d.name]->to_string(), " but ", d.size, " in ", s->to_string()));
      }
    }
  return sizes;
}

Shape shape_of(const Names& names, const std::map<std::string, std::int64_t>& sizes) {
  std::vector<Dimension> dims;
  for (const auto& n : names)
    dims.push_back({n, sizes.at(n)});
  return Shape(dims);
}

Names concat(std::initializer_list<const Names*> parts) {
  Names out;
  for (const Names* p : parts)
    out.insert(out.end(), p->begin(), p->end());
  return out;
}

std::int64_t product(const Names& names, const std::map<std::string, std::int64_t>& sizes) {
  std::int64_t p = 1;
  for (const auto& n : names)
    p *= sizes.at(n);
  return p;
}

// Whether `s` is stored in the order `names` (a permutation of its dims): size-1 dims do not
// affect the memory order and are ignored.
bool stored_as(const Shape& s, const Names& names) {
  Names a, b;
  for (const auto& d : s.dims())
    if (d.size != 1)
      a.push_back(d.name);
  for (const auto& n : names)
    if (s.size_of(n) != 1)
      b.push_back(n);
  return a == b;
}

// C = op(A) op(B) on `space` (Kokkos Kernels 3 has no execution-space overload: default instance).
template <class AM, class BM, class CM>
void gemm(const ExecSpace& space, const char* ta, const char* tb, const AM& a, const BM& b,
          const CM& c) {
#if KOKKOS_VERSION >= 40000
  KokkosBlas::gemm(space, ta, tb, 1.0f, a, b, 0.0f, c);
#else
  (void)space;
  KokkosBlas::gemm(ta, tb, 1.0f, a, b, 0.0f, c);
#endif
}

// Sums the dims of `s` that are in neither `other` nor `out`.
void presum(const ExecSpace& space, Shape& s, FView& x, const Shape& other, const Shape& out) {
  std::vector<Dimension> keep;
  for (const auto& d : s.dims())
    if (other.contains(d.name) || out.contains(d.name))
      keep.push_back(d);
  if (static_cast<int>(keep.size()) == s.rank())
    return;
  Shape kept(keep);
  x = reduce(space, ReduceFn::sum, s, x, kept);
  s = kept;
}

// x (shape `in`) copied into the dim order of `out` (the same dims, permuted). The trailing dims
// both orders share form contiguous runs copied as such, so the index arithmetic is per run (an
// attention operand [b, m, h, d] -> [b, h, m, d] moves runs of d), not per element.
FView permuted(const ExecSpace& space, const Shape& in, const FView& x, const Shape& out) {
  const char* label = "mtk::kernels::einsum transposed copy";
  int common = 0;
  while (common < out.rank() &&
         out[out.rank() - 1 - common].name == in[in.rank() - 1 - common].name)
    ++common;
  std::int64_t run = 1;
  for (int i = out.rank() - common; i < out.rank(); ++i)
    run *= out[i].size;
  IndexMap rows;  // row-major row index over out's leading dims -> offset in x
  rows.rank = out.rank() - common;
  const auto in_strides = in.strides();
  for (int i = 0; i < rows.rank; ++i) {
    rows.extent[i] = out[i].size;
    rows.stride[i] = in_strides[static_cast<size_t>(in.index_of(out[i].name))];
  }
  FView y = impl::alloc<float>(label, out.num_elements());
  Kokkos::parallel_for(
      label, impl::Range(space, 0, out.num_elements() / run), KOKKOS_LAMBDA(std::int64_t r) {
        const std::int64_t src = rows.offset(r), dst = r * run;
        for (std::int64_t j = 0; j < run; ++j)
          y(dst + j) = x(src + j);
      });
  return y;
}

char flip(char t) {
  return t == 'N' ? 'T' : 'N';
}

int blas_int(const char* where, std::int64_t n, const char* what) {
  if (n > std::numeric_limits<int>::max())
    fail(where, cat(what, " size ", n, " exceeds the BLAS int range"));
  return static_cast<int>(n);
}

constexpr bool host_space = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;

// One operand of a batched product seen in place: per batch entry, a row-major matrix whose rows
// (one collapsed group of dims) lie `ld` apart and whose columns (another group) are contiguous.
// Attention operands such as q [batch, length, heads, d_kv] are matrices [length][d_kv] with
// ld = heads * d_kv for each (batch, heads): the host BLAS reads them without a transposed copy.
struct InPlace {
  std::int64_t ld = 1;
  IndexMap batch;  // batch entry (row-major over the batch dims) -> element offset
};

// Whether `s` holds, for each entry of `batch`, the matrix [rows][cols] in place (see InPlace).
bool in_place(const Shape& s, const Names& batch, const Names& rows, const Names& cols,
              const std::map<std::string, std::int64_t>& sizes, InPlace& out) {
  if (static_cast<int>(batch.size()) > max_rank)
    return false;
  const auto strides = s.strides();
  auto stride_of = [&](const std::string& n) {
    return strides[static_cast<size_t>(s.index_of(n))];
  };
  // A group collapses when each non-unit dim's stride is the next one's stride times its size.
  auto collapses = [&](const Names& group, std::int64_t& inner_stride) {
    const std::string* prev = nullptr;
    inner_stride = 0;
    for (const auto& n : group) {
      if (sizes.at(n) == 1)
        continue;
      if (prev && stride_of(*prev) != stride_of(n) * sizes.at(n))
        return false;
      prev = &n;
      inner_stride = stride_of(n);
    }
    return true;
  };
  std::int64_t col_stride = 0, row_stride = 0;
  if (!collapses(cols, col_stride) || (col_stride != 0 && col_stride != 1) ||
      !collapses(rows, row_stride))
    return false;
  const std::int64_t ncols = product(cols, sizes);
  out.ld = row_stride != 0 ? row_stride : std::max<std::int64_t>(1, ncols);
  if (out.ld < ncols || out.ld > std::numeric_limits<int>::max())
    return false;
  out.batch.rank = static_cast<int>(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    out.batch.extent[i] = sizes.at(batch[i]);
    out.batch.stride[i] = stride_of(batch[i]);
  }
  return true;
}

// Host buffers for the rounded operands, grown as needed and released before Kokkos finalizes.
struct RoundBuffers {
  FView a, b;
  bool hooked = false;
};

RoundBuffers& round_buffers() {
  static RoundBuffers r;
  if (!r.hooked) {
    r.hooked = true;
    Kokkos::push_finalize_hook([] {
      round_buffers().a = FView();
      round_buffers().b = FView();
    });
  }
  return r;
}

// x rounded to bf16 values, in `reuse` (grown when too small) on host spaces.
FView rounded(const ExecSpace& space, const FView& x, FView& reuse) {
  const auto n = static_cast<std::int64_t>(x.extent(0));
  FView out;
  if constexpr (host_space) {
    if (static_cast<std::int64_t>(reuse.extent(0)) < n)
      reuse = FView();  // free before allocating the larger one
    if (static_cast<std::int64_t>(reuse.extent(0)) < n)
      reuse = impl::alloc<float>("mtk::kernels::einsum bf16 operand", n);
    out = FView(reuse.data(), static_cast<size_t>(n));
  } else {
    (void)reuse;
    out = impl::alloc<float>("mtk::kernels::einsum bf16 operand", n);
  }
  Kokkos::parallel_for(
      "mtk::kernels::einsum bf16 rounding", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t i) { out(i) = round_to_bfloat16(x(i)); });
  return out;
}

bool& in_place_switch() {
  static bool on = [] {
    const char* v = std::getenv("MTK_EINSUM_IN_PLACE");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
// Whether `s` holds the matrix [rows][cols] or [cols][rows] in place (`info` for the one found).
bool fits_in_place(const Shape& s, const Names& batch, const Names& rows, const Names& cols,
                   const std::map<std::string, std::int64_t>& sizes, InPlace& info) {
  return in_place(s, batch, rows, cols, sizes, info) || in_place(s, batch, cols, rows, sizes, info);
}

// Operand x as the matrix [rows][cols] per batch entry: 'N' in place, 'T' in place as
// [cols][rows], else 'N' after a transposed copy into [batch][rows][cols] (x, shape updated).
char as_matrix(const ExecSpace& space, Shape& shape, FView& x, const Names& batch,
               const Names& rows, const Names& cols,
               const std::map<std::string, std::int64_t>& sizes, InPlace& info) {
  if (in_place(shape, batch, rows, cols, sizes, info))
    return 'N';
  if (in_place(shape, batch, cols, rows, sizes, info))
    return 'T';
  const Shape s = shape_of(concat({&batch, &rows, &cols}), sizes);
  x = permuted(space, shape, x, s);
  shape = s;
  in_place(shape, batch, rows, cols, sizes, info);
  return 'N';
}

// The product on the host BLAS with every operand read or written in place where its dims allow
// (InPlace), else through a transposed copy into [batch][M][K] / [batch][K][N] / [batch][M][N].
FView host_gemm_in_place(const ExecSpace& space, Shape a_shape, FView a, Shape b_shape, FView b,
                         const Shape& out_shape, const Names& batch, const Names& m_dims,
                         const Names& n_dims, const Names& k_in_a, const Names& k_in_b,
                         const std::map<std::string, std::int64_t>& sizes) {
  const char* where = "mtk::kernels::einsum";
  const std::int64_t nb = product(batch, sizes), m = product(m_dims, sizes),
                     n = product(n_dims, sizes), k = product(k_in_a, sizes);
  InPlace ia, ib, ic;
  // K's order: the one that lets more operands stay in place (a's on a tie).
  auto fits = [&](const Names& kk) {
    InPlace t;
    return (fits_in_place(a_shape, batch, m_dims, kk, sizes, t) ? 1 : 0) +
           (fits_in_place(b_shape, batch, kk, n_dims, sizes, t) ? 1 : 0);
  };
  const Names& k_dims = fits(k_in_a) >= fits(k_in_b) ? k_in_a : k_in_b;

  // Row-major forms: a is [M][K] ('N') or [K][M] ('T'); b is [K][N] ('N') or [N][K] ('T').
  const char ta = as_matrix(space, a_shape, a, batch, m_dims, k_dims, sizes, ia);
  const char tb = as_matrix(space, b_shape, b, batch, k_dims, n_dims, sizes, ib);
  // c is [M][N] (direct), [N][M] (swapped) or a temporary [batch][M][N] transposed into out.
  const std::int64_t out_n = out_shape.num_elements();
  FView c = impl::alloc<float>(where, out_n);
  Shape c_shape = out_shape;
  bool swapped = false;
  if (!in_place(c_shape, batch, m_dims, n_dims, sizes, ic)) {
    swapped = in_place(c_shape, batch, n_dims, m_dims, sizes, ic);
    if (!swapped) {
      c_shape = shape_of(concat({&batch, &m_dims, &n_dims}), sizes);
      in_place(c_shape, batch, m_dims, n_dims, sizes, ic);
    }
  }
  const int mi = blas_int(where, m, "M"), ni = blas_int(where, n, "N"),
            ki = blas_int(where, k, "K");
  const int lda = static_cast<int>(ia.ld), ldb = static_cast<int>(ib.ld),
            ldc = static_cast<int>(ic.ld);
  // Column-major BLAS sees a row-major matrix as its transpose: C = A B is computed as
  // C^T = B^T A^T; swapped (out holds C^T), as C = A B with both operands' transposes flipped.
  using Blas = KokkosBlas::Impl::HostBlas<float>;
  space.fence();
  Kokkos::Profiling::pushRegion("mtk::kernels::einsum host BLAS sgemm in place");
  for (std::int64_t i = 0; i < nb; ++i) {
    const float* ap = a.data() + ia.batch.offset(i);
    const float* bp = b.data() + ib.batch.offset(i);
    float* cp = c.data() + ic.batch.offset(i);
    if (swapped)
      Blas::gemm(flip(ta), flip(tb), mi, ni, ki, 1.0f, ap, lda, bp, ldb, 0.0f, cp, ldc);
    else
      Blas::gemm(tb, ta, ni, mi, ki, 1.0f, bp, ldb, ap, lda, 0.0f, cp, ldc);
  }
  Kokkos::Profiling::popRegion();
  if (!(c_shape == out_shape))
    c = permuted(space, c_shape, c, out_shape);
  return c;
}
#endif

struct Bf16Choice {
  bool forced = false;
  Bf16Gemm path = Bf16Gemm::automatic;
};

Bf16Choice& bf16_choice() {
  static Bf16Choice c;
  return c;
}

Bf16Gemm requested_bf16_gemm() {
  if (bf16_choice().forced)
    return bf16_choice().path;
  static const Bf16Gemm from_env = [] {
    const char* v = std::getenv("MTK_BF16_GEMM");
    const std::string s = v ? v : "";
    if (s.empty() || s == "auto")
      return Bf16Gemm::automatic;
    if (s == "onednn")
      return Bf16Gemm::onednn;
    if (s == "emulate")
      return Bf16Gemm::emulate;
    fail("mtk::kernels::einsum", cat("MTK_BF16_GEMM = '", s, "'; use auto, onednn or emulate"));
  }();
  return from_env;
}

bool onednn_is_native() {
  if (!impl::onednn_available() || !impl::onednn_has_bf16())
    return false;
  const std::string impl = impl::onednn_bf16_impl();
  return !impl.empty() && impl.rfind("ref", 0) != 0;
}

}  // namespace detail::einsum_impl

#ifndef MTK_HAVE_ONEDNN
namespace impl {
bool onednn_available() {
  return false;
}
std::string onednn_bf16_impl() {
  return "";
}
bool onednn_has_bf16() {
  return false;
}
void onednn_bf16_matmul(const float*, bool, const float*, bool, float*, std::int64_t, std::int64_t,
                        std::int64_t, std::int64_t) {
  fail("mtk::kernels::einsum", "this MTK was built without oneDNN (MTK_ENABLE_ONEDNN)");
}
}  // namespace impl
#endif

void set_einsum_in_place(bool on) {
  detail::einsum_impl::in_place_switch() = on;
}

void set_bf16_gemm(Bf16Gemm path) {
  if (path == Bf16Gemm::onednn && !impl::onednn_available())
    fail("mtk::kernels::set_bf16_gemm",
         "the oneDNN path was asked for but this MTK was built without oneDNN "
         "(MTK_ENABLE_ONEDNN; Debian package libdnnl-dev)");
  detail::einsum_impl::bf16_choice() = {true, path};
}

Bf16Gemm bf16_gemm() {
  using namespace detail::einsum_impl;
  const Bf16Gemm r = requested_bf16_gemm();
  if (r == Bf16Gemm::onednn && !impl::onednn_available())
    fail("mtk::kernels::einsum",
         "MTK_BF16_GEMM=onednn but this MTK was built without oneDNN (MTK_ENABLE_ONEDNN)");
  if (r != Bf16Gemm::automatic)
    return r;
  return onednn_is_native() ? Bf16Gemm::onednn : Bf16Gemm::emulate;
}

bool bf16_gemm_is_emulated() {
  return !detail::einsum_impl::host_space || bf16_gemm() == Bf16Gemm::emulate ||
         !detail::einsum_impl::onednn_is_native();
}

std::string bf16_gemm_description() {
  using namespace detail::einsum_impl;
  const std::string chosen = impl::onednn_available() ? impl::onednn_bf16_impl() : "not built in";
  if (!host_space)
    return "emulated on this execution space: operands rounded to bf16, fp32 gemm";
  if (bf16_gemm() == Bf16Gemm::onednn && !impl::onednn_has_bf16())
    return cat("oneDNN f32 matmul on bf16-rounded operands (", chosen,
               "), slower than fp32: forced (MTK_BF16_GEMM=onednn)");
  if (bf16_gemm() == Bf16Gemm::onednn)
    return cat("oneDNN bf16 matmul (", chosen, ")",
               onednn_is_native() ? "" : ": oneDNN's reference code, slower than fp32");
  return cat("emulated: operands rounded to bf16 and multiplied by the fp32 gemm (oneDNN: ", chosen,
             ")",
             onednn_is_native() ? "" : "; this CPU has no native bf16 matmul (avx512_bf16/amx)",
             ", slower than fp32");
}

FView einsum(const ExecSpace& space, const Shape& a_shape_in, const FView& a_in,
             const Shape& b_shape_in, const FView& b_in, const Shape& out_shape,
             Precision precision) {
  using namespace detail::einsum_impl;
  const char* where = "mtk::kernels::einsum";
  check_size(where, a_shape_in, a_in, "operand a");
  check_size(where, b_shape_in, b_in, "operand b");
  const auto sizes = sizes_of(where, {&a_shape_in, &b_shape_in, &out_shape});
  for (const auto& d : out_shape.dims())
    if (!a_shape_in.contains(d.name) && !b_shape_in.contains(d.name))
      fail(where,
           cat("output dimension '", d.name, "' of ", out_shape.to_string(),
               " is in neither operand ", a_shape_in.to_string(), " nor ", b_shape_in.to_string()));

  Kokkos::Profiling::pushRegion(where);
  Shape a_shape = a_shape_in, b_shape = b_shape_in;
  FView a = a_in, b = b_in;
  const bool bf16 = precision == Precision::bfloat16;
  const bool use_onednn = bf16 && host_space && bf16_gemm() == Bf16Gemm::onednn;
  // bf16 (docs/ops-and-lowering.md "bfloat16 contractions"): dims of one operand only are summed in
  // float32 first, then each operand is rounded to bf16 once; every path below multiplies those
  // bf16 values exactly and accumulates in float32.
  presum(space, a_shape, a, b_shape, out_shape);
  presum(space, b_shape, b, a_shape, out_shape);
  if (bf16 && a.extent(0) > 0 && b.extent(0) > 0) {
    a = rounded(space, a, round_buffers().a);
    b = rounded(space, b, round_buffers().b);
  }

  Names batch, m_dims, n_dims, k_in_a, k_in_b;
  for (const auto& d : out_shape.dims()) {
    const bool in_a = a_shape.contains(d.name), in_b = b_shape.contains(d.name);
    (in_a && in_b ? batch : in_a ? m_dims : n_dims).push_back(d.name);
  }
  for (const auto& d : a_shape.dims())
    if (b_shape.contains(d.name) && !out_shape.contains(d.name))
      k_in_a.push_back(d.name);
  for (const auto& d : b_shape.dims())
    if (a_shape.contains(d.name) && !out_shape.contains(d.name))
      k_in_b.push_back(d.name);

  const std::int64_t nb = product(batch, sizes), m = product(m_dims, sizes),
                     n = product(n_dims, sizes), k = product(k_in_a, sizes);
  const std::int64_t out_n = out_shape.num_elements();
  if (out_n == 0 || k == 0) {  // nothing to compute, or an empty sum: zeros
    FView out(std::string(where), static_cast<size_t>(out_n));
    Kokkos::Profiling::popRegion();
    return out;
  }

  // Batched products of vectors are elementwise work, not matrix work: one gemm call per batch
  // entry would dominate. No contraction: a broadcast multiply. Only a contraction (M and N empty):
  // a multiply, then a sum over the contracted dims.
  if (nb > 1 && k_in_a.empty()) {
    FView out = binary<float>(space, BinaryFn::multiply, a_shape, a, b_shape, b, out_shape);
    Kokkos::Profiling::popRegion();
    return out;
  }
  if (nb > 1 && m_dims.empty() && n_dims.empty()) {
    std::vector<Dimension> all = out_shape.dims();
    for (const auto& name : k_in_a)
      all.push_back(a_shape.dim(name));
    const Shape product_shape(all);
    FView prod = binary<float>(space, BinaryFn::multiply, a_shape, a, b_shape, b, product_shape);
    FView out = reduce<float>(space, ReduceFn::sum, product_shape, prod, out_shape);
    Kokkos::Profiling::popRegion();
    return out;
  }

#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
  if constexpr (host_space) {
    if (!use_onednn && in_place_switch()) {
      FView out = host_gemm_in_place(space, a_shape, a, b_shape, b, out_shape, batch, m_dims,
                                     n_dims, k_in_a, k_in_b, sizes);
      Kokkos::Profiling::popRegion();
      return out;
    }
  }
#endif

  // K's order: a's, unless only b's order spares a copy.
  auto fits_a = [&](const Names& kk) {
    return stored_as(a_shape, concat({&batch, &m_dims, &kk})) ||
           stored_as(a_shape, concat({&batch, &kk, &m_dims}));
  };
  auto fits_b = [&](const Names& kk) {
    return stored_as(b_shape, concat({&batch, &kk, &n_dims})) ||
           stored_as(b_shape, concat({&batch, &n_dims, &kk}));
  };
  const Names& k_dims = (fits_a(k_in_a) ? 1 : 0) + (fits_b(k_in_a) ? 1 : 0) >=
                                (fits_a(k_in_b) ? 1 : 0) + (fits_b(k_in_b) ? 1 : 0)
                            ? k_in_a
                            : k_in_b;

  char ta = 'N', tb = 'N';
  const Names a_nk = concat({&batch, &m_dims, &k_dims});
  if (stored_as(a_shape, a_nk)) {
    ta = 'N';
  } else if (stored_as(a_shape, concat({&batch, &k_dims, &m_dims}))) {
    ta = 'T';
  } else {
    const Shape s = shape_of(a_nk, sizes);
    a = permuted(space, a_shape, a, s);
    a_shape = s;
  }
  const Names b_kn = concat({&batch, &k_dims, &n_dims});
  if (stored_as(b_shape, b_kn)) {
    tb = 'N';
  } else if (stored_as(b_shape, concat({&batch, &n_dims, &k_dims}))) {
    tb = 'T';
  } else {
    const Shape s = shape_of(b_kn, sizes);
    b = permuted(space, b_shape, b, s);
    b_shape = s;
  }

  const Names c_mn = concat({&batch, &m_dims, &n_dims});
  const bool direct = stored_as(out_shape, c_mn);
  const bool swapped = !direct && stored_as(out_shape, concat({&batch, &n_dims, &m_dims}));
  FView c = impl::alloc<float>(where, out_n);

  const int mi = blas_int(where, m, "M"), ni = blas_int(where, n, "N"),
            ki = blas_int(where, k, "K");
  const char ta_s[2] = {ta, 0}, tb_s[2] = {tb, 0};
  const char ta_f[2] = {flip(ta), 0}, tb_f[2] = {flip(tb), 0};
  if (use_onednn) {  // one batched primitive; host memory (use_onednn implies a host space)
    space.fence();
    if (swapped)
      impl::onednn_bf16_matmul(b.data(), tb == 'N', a.data(), ta == 'N', c.data(), nb, n, m, k);
    else
      impl::onednn_bf16_matmul(a.data(), ta == 'T', b.data(), tb == 'T', c.data(), nb, m, n, k);
  }
  for (std::int64_t i = 0; i < (use_onednn ? 0 : nb); ++i) {
    const CMat ai(a.data() + i * m * k, ta == 'N' ? mi : ki, ta == 'N' ? ki : mi);
    const CMat bi(b.data() + i * k * n, tb == 'N' ? ki : ni, tb == 'N' ? ni : ki);
    if (swapped) {  // C^T = B^T A^T, written straight into out's [batch][N][M] order
      const Mat ci(c.data() + i * m * n, ni, mi);
      gemm(space, tb_f, ta_f, bi, ai, ci);
    } else {
      const Mat ci(c.data() + i * m * n, mi, ni);
      gemm(space, ta_s, tb_s, ai, bi, ci);
    }
  }
  if (!direct && !swapped)
    c = permuted(space, shape_of(c_mn, sizes), c, out_shape);
  Kokkos::Profiling::popRegion();
  return c;
}

FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& out_shape) {
  using namespace detail::einsum_impl;
  const char* where = "mtk::kernels::einsum";
  check_size(where, a_shape, a, "operand");
  sizes_of(where, {&a_shape, &out_shape});
  for (const auto& d : out_shape.dims())
    if (!a_shape.contains(d.name))
      fail(where, cat("output dimension '", d.name, "' of ", out_shape.to_string(),
                      " is not in operand ", a_shape.to_string()));
  return reduce(space, ReduceFn::sum, a_shape, a, out_shape);
}

std::int64_t einsum_macs(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape) {
  using namespace detail::einsum_impl;
  const char* where = "mtk::kernels::einsum_macs";
  std::int64_t macs = 1;
  for (const auto& [name, size] : sizes_of(where, {&a_shape, &b_shape, &out_shape}))
    macs = checked_mul(macs, size, where, [&] {
      return cat("the multiply-adds of ", a_shape.to_string(), " x ", b_shape.to_string(), " -> ",
                 out_shape.to_string());
    });
  return macs;
}

}  // namespace mtk::kernels
