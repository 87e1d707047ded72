// einsum body: the host BLAS's sgemm per batch entry with every operand read or written in place
// where its dims allow, else through a transposed copy (impl/einsum_spec.hpp). Built where Kokkos
// Kernels has a BLAS TPL (OpenBLAS); host memory only.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/index.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
#include <KokkosBlas_Host_tpl.hpp>
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

namespace mtk::kernels::einsum_impl {

#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
namespace {

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
              const Sizes& sizes, InPlace& out) {
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

// Whether `s` holds the matrix [rows][cols] or [cols][rows] in place (`info` for the one found).
bool fits_in_place(const Shape& s, const Names& batch, const Names& rows, const Names& cols,
                   const Sizes& sizes, InPlace& info) {
  return in_place(s, batch, rows, cols, sizes, info) || in_place(s, batch, cols, rows, sizes, info);
}

// Operand x as the matrix [rows][cols] per batch entry: 'N' in place, 'T' in place as
// [cols][rows], else 'N' after a transposed copy into [batch][rows][cols] (x, shape updated).
char as_matrix(const ExecSpace& space, Operand& op, const Names& batch, const Names& rows,
               const Names& cols, const Sizes& sizes, InPlace& info) {
  if (in_place(op.shape, batch, rows, cols, sizes, info))
    return 'N';
  if (in_place(op.shape, batch, cols, rows, sizes, info))
    return 'T';
  const Shape s = shape_of(concat({&batch, &rows, &cols}), sizes);
  op.x = permuted(space, op.shape, op.x, s);
  op.shape = s;
  in_place(op.shape, batch, rows, cols, sizes, info);
  return 'N';
}

}  // namespace

FView host_blas_in_place(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                         const Plan& plan, const Sizes& sizes) {
  const char* where = "mtk::kernels::einsum";
  const Names &batch = plan.batch, &m_dims = plan.m_dims, &n_dims = plan.n_dims;
  InPlace ia, ib, ic;
  // K's order: the one that lets more operands stay in place (a's on a tie).
  auto fits = [&](const Names& kk) {
    InPlace t;
    return (fits_in_place(a.shape, batch, m_dims, kk, sizes, t) ? 1 : 0) +
           (fits_in_place(b.shape, batch, kk, n_dims, sizes, t) ? 1 : 0);
  };
  const Names& k_dims = fits(plan.k_in_a) >= fits(plan.k_in_b) ? plan.k_in_a : plan.k_in_b;

  // Row-major forms: a is [M][K] ('N') or [K][M] ('T'); b is [K][N] ('N') or [N][K] ('T').
  const char ta = as_matrix(space, a, batch, m_dims, k_dims, sizes, ia);
  const char tb = as_matrix(space, b, batch, k_dims, n_dims, sizes, ib);
  // c is [M][N] (direct), [N][M] (swapped) or a temporary [batch][M][N] transposed into out.
  FView c = impl::alloc<float>(where, out_shape.num_elements());
  Shape c_shape = out_shape;
  bool swapped = false;
  if (!in_place(c_shape, batch, m_dims, n_dims, sizes, ic)) {
    swapped = in_place(c_shape, batch, n_dims, m_dims, sizes, ic);
    if (!swapped) {
      c_shape = shape_of(concat({&batch, &m_dims, &n_dims}), sizes);
      in_place(c_shape, batch, m_dims, n_dims, sizes, ic);
    }
  }
  const int mi = blas_int(where, plan.m, "M"), ni = blas_int(where, plan.n, "N"),
            ki = blas_int(where, plan.k, "K");
  const int lda = static_cast<int>(ia.ld), ldb = static_cast<int>(ib.ld),
            ldc = static_cast<int>(ic.ld);
  // Column-major BLAS sees a row-major matrix as its transpose: C = A B is computed as
  // C^T = B^T A^T; swapped (out holds C^T), as C = A B with both operands' transposes flipped.
  using Blas = KokkosBlas::Impl::HostBlas<float>;
  space.fence();
  Kokkos::Profiling::pushRegion("mtk::kernels::einsum host BLAS sgemm in place");
  for (std::int64_t i = 0; i < plan.nb; ++i) {
    const float* ap = a.x.data() + ia.batch.offset(i);
    const float* bp = b.x.data() + ib.batch.offset(i);
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

#else

FView host_blas_in_place(const ExecSpace&, Operand, Operand, const Shape&, const Plan&,
                         const Sizes&) {
  fail("mtk::kernels::einsum",
       "this Kokkos Kernels has no host BLAS (KOKKOSKERNELS_ENABLE_TPL_BLAS)");
}

#endif

}  // namespace mtk::kernels::einsum_impl
