// einsum body: operands packed into gemm order, then KokkosBlas::gemm per batch entry, or on an
// GPU one strided-batched GPU BLAS call for the whole batch (impl/einsum_spec.hpp). Each
// operand is used in place when its memory order is [batch][M][K] / [batch][K][M] (a) or
// [batch][K][N] / [batch][N][K] (b), as gemm's "N" / "T"; otherwise a transposed copy is made. The
// result is written straight into out when out's order is [batch][M][N], or [batch][N][M]
// (computing C^T = B^T A^T); otherwise into a temporary that is transposed into out.
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <KokkosBlas3_gemm.hpp>
#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels::einsum_impl {
namespace {

using Mat = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::MemoryUnmanaged>;
using CMat = Kokkos::View<const float**, Kokkos::LayoutRight, Kokkos::MemoryUnmanaged>;

// C = op(A) op(B) + beta C on `space` (Kokkos Kernels 3 has no execution-space overload: default
// instance).
template <class AM, class BM, class CM>
void gemm(const ExecSpace& space, const char* ta, const char* tb, const AM& a, const BM& b,
          float beta, const CM& c) {
#if KOKKOS_VERSION >= 40000
  KokkosBlas::gemm(space, ta, tb, 1.0f, a, b, beta, c);
#else
  (void)space;
  KokkosBlas::gemm(ta, tb, 1.0f, a, b, beta, c);
#endif
}

// K's order: a's, unless only b's order spares a copy.
const Names& k_order(const Operand& a, const Operand& b, const Plan& p) {
  auto fits_a = [&](const Names& kk) {
    return stored_as(a.shape, concat({&p.batch, &p.m_dims, &kk})) ||
           stored_as(a.shape, concat({&p.batch, &kk, &p.m_dims}));
  };
  auto fits_b = [&](const Names& kk) {
    return stored_as(b.shape, concat({&p.batch, &kk, &p.n_dims})) ||
           stored_as(b.shape, concat({&p.batch, &p.n_dims, &kk}));
  };
  return (fits_a(p.k_in_a) ? 1 : 0) + (fits_b(p.k_in_a) ? 1 : 0) >=
                 (fits_a(p.k_in_b) ? 1 : 0) + (fits_b(p.k_in_b) ? 1 : 0)
             ? p.k_in_a
             : p.k_in_b;
}

// Operand `op` as the matrices [rows][cols] per batch entry: 'N' stored so, 'T' stored as
// [cols][rows], else 'N' after a transposed copy into [batch][rows][cols].
char pack(const ExecSpace& space, Operand& op, const Names& batch, const Names& rows,
          const Names& cols, const Sizes& sizes) {
  const Names direct = concat({&batch, &rows, &cols});
  if (stored_as(op.shape, direct))
    return 'N';
  if (stored_as(op.shape, concat({&batch, &cols, &rows})))
    return 'T';
  const Shape s = shape_of(direct, sizes);
  op.x = permuted(space, op.shape, op.x, s);
  op.shape = s;
  return 'N';
}

// c_i = op(a_i) op(b_i) per batch entry through KokkosBlas::gemm; swapped: c_i^T = op(b_i)^T
// op(a_i)^T, written straight into out's [batch][N][M] order.
void kokkos_gemm_batch(const ExecSpace& space, const Plan& p, const FView& a, char ta,
                       const FView& b, char tb, const FView& c, bool swapped, float beta) {
  const char* where = "mtk::kernels::einsum";
  const std::int64_t m = p.m, n = p.n, k = p.k;
  const int mi = blas_int(where, m, "M"), ni = blas_int(where, n, "N"),
            ki = blas_int(where, k, "K");
  const char ta_s[2] = {ta, 0}, tb_s[2] = {tb, 0};
  const char ta_f[2] = {flip(ta), 0}, tb_f[2] = {flip(tb), 0};
  for (std::int64_t i = 0; i < p.nb; ++i) {
    const CMat ai(a.data() + i * m * k, ta == 'N' ? mi : ki, ta == 'N' ? ki : mi);
    const CMat bi(b.data() + i * k * n, tb == 'N' ? ki : ni, tb == 'N' ? ni : ki);
    if (swapped) {
      const Mat ci(c.data() + i * m * n, ni, mi);
      gemm(space, tb_f, ta_f, bi, ai, beta, ci);
    } else {
      const Mat ci(c.data() + i * m * n, mi, ni);
      gemm(space, ta_s, tb_s, ai, bi, beta, ci);
    }
  }
}

// The batch in one GPU BLAS call (swapped: the operands exchanged and their ops flipped, as above);
// bf16: the packed operands converted to bf16 storage first.
[[maybe_unused]] void gpu_blas_batch(const ExecSpace& space, const Plan& p, const FView& a, char ta,
                                     const FView& b, char tb, const FView& c, bool swapped,
                                     float beta, bool bf16) {
  impl::BatchedGemm g;
  g.nb = p.nb;
  g.k = p.k;
  g.beta = beta;
  g.m = swapped ? p.n : p.m;
  g.n = swapped ? p.m : p.n;
  g.ta = swapped ? flip(tb) : ta;
  g.tb = swapped ? flip(ta) : tb;
  const float* x = swapped ? b.data() : a.data();
  const float* y = swapped ? a.data() : b.data();
  if (!bf16)
    return impl::gpu_blas_gemm(space, g, x, y, c.data());
  const char* label = "mtk::kernels::einsum bf16 operand";
  const std::int64_t nx = g.nb * g.m * g.k, ny = g.nb * g.k * g.n;
  const auto x16 = impl::alloc<std::uint16_t>(label, nx);
  const auto y16 = impl::alloc<std::uint16_t>(label, ny);
  const char* conversion = "mtk::kernels::einsum bf16 conversion";  // as the oneDNN body's
  convert_to_bfloat16_bits(space, conversion, x, x16.data(), nx);
  convert_to_bfloat16_bits(space, conversion, y, y16.data(), ny);
  impl::gpu_blas_gemm_bf16(space, g, x16.data(), y16.data(), c.data());
}

}  // namespace

FView packed_gemm(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                  const Plan& plan, const Sizes& sizes, const FView& into, bool bf16) {
  const Names& k_dims = k_order(a, b, plan);
  const char ta = pack(space, a, plan.batch, plan.m_dims, k_dims, sizes);
  const char tb = pack(space, b, plan.batch, k_dims, plan.n_dims, sizes);
  const Names c_mn = concat({&plan.batch, &plan.m_dims, &plan.n_dims});
  const bool direct = stored_as(out_shape, c_mn);
  const bool swapped =
      !direct && stored_as(out_shape, concat({&plan.batch, &plan.n_dims, &plan.m_dims}));
  // Accumulating (beta = 1) straight into `into` when the result lies in out's order.
  const bool add = into.data() && (direct || swapped);
  FView c = add ? into : impl::alloc<float>("mtk::kernels::einsum", out_shape.num_elements());
  if constexpr (impl::gpu_blas_available())
    gpu_blas_batch(space, plan, a.x, ta, b.x, tb, c, swapped, add ? 1.0f : 0.0f, bf16);
  else
    kokkos_gemm_batch(space, plan, a.x, ta, b.x, tb, c, swapped, add ? 1.0f : 0.0f);
  if (!direct && !swapped)
    c = permuted(space, shape_of(c_mn, sizes), c, out_shape);
  return c;
}

}  // namespace mtk::kernels::einsum_impl
