// einsum body: the host BLAS's sgemm per batch entry with every operand read or written in place
// where its dims allow, else through a transposed copy (impl/einsum_spec.hpp). Built where Kokkos
// Kernels has a BLAS TPL (OpenBLAS); host memory only.
#include <mtk/base/error.hpp>
#include <mtk/kernels/impl/einsum_in_place.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>
#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
#include <KokkosBlas_Host_tpl.hpp>
#endif

#include <cstdint>

namespace mtk::kernels::einsum_impl {

#if defined(KOKKOSKERNELS_ENABLE_TPL_BLAS)
FView host_blas_in_place(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                         const Plan& plan, const Sizes& sizes, const FView& into) {
  const char* where = "mtk::kernels::einsum";
  const InPlaceProduct p = arrange_in_place(space, a, b, out_shape, plan, sizes);
  const char ta = p.ta, tb = p.tb;
  const bool swapped = p.swapped;
  const InPlace &ia = p.ia, &ib = p.ib, &ic = p.ic;
  // Accumulating (beta = 1) straight into `into` when the result lies in out's order.
  const bool add = into.data() && p.c_shape == out_shape;
  FView c = add ? into : impl::alloc<float>(where, out_shape.num_elements());
  const float beta = add ? 1.0f : 0.0f;
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
      Blas::gemm(flip(ta), flip(tb), mi, ni, ki, 1.0f, ap, lda, bp, ldb, beta, cp, ldc);
    else
      Blas::gemm(tb, ta, ni, mi, ki, 1.0f, bp, ldb, ap, lda, beta, cp, ldc);
  }
  Kokkos::Profiling::popRegion();
  if (!(p.c_shape == out_shape))
    c = permuted(space, p.c_shape, c, out_shape);
  return c;
}

#else

FView host_blas_in_place(const ExecSpace&, Operand, Operand, const Shape&, const Plan&,
                         const Sizes&, const FView&) {
  fail("mtk::kernels::einsum",
       "this Kokkos Kernels has no host BLAS (KOKKOSKERNELS_ENABLE_TPL_BLAS)");
}

#endif

}  // namespace mtk::kernels::einsum_impl
