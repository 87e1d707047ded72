// einsum body: one oneDNN matmul per contraction, operands read where they lie through their
// strides (impl/einsum_in_place.hpp), float32 or bfloat16 (impl/einsum_spec.hpp). bf16 operands
// are converted to bf16 storage in one vectorised pass each: the same values round_to_bfloat16
// gives, so every bf16 path multiplies the same numbers.
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/impl/einsum_in_place.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace mtk::kernels::einsum_impl {
namespace {

using Bits = Kokkos::View<std::uint16_t*>;

// Row and column strides of a row-major [rows][cols] matrix stored as op ('N') or transposed.
void matrix_strides(char op, std::int64_t ld, std::int64_t* s) {
  s[0] = op == 'N' ? ld : 1;
  s[1] = op == 'N' ? 1 : ld;
}

[[maybe_unused]] impl::StridedMatmul describe(const InPlaceProduct& p, const Plan& plan,
                                              bool bf16) {
  impl::StridedMatmul d;
  d.bf16 = bf16;
  d.batch_rank = p.ia.batch.rank;
  // Swapped, oneDNN's source is b and its weights a.
  const InPlace& src = p.swapped ? p.ib : p.ia;
  const InPlace& weights = p.swapped ? p.ia : p.ib;
  for (int i = 0; i < d.batch_rank; ++i) {
    d.batch[i] = p.ia.batch.extent[i];
    d.a_strides[i] = src.batch.stride[i];
    d.b_strides[i] = weights.batch.stride[i];
    d.c_strides[i] = p.ic.batch.stride[i];
  }
  const int r = d.batch_rank;
  std::int64_t as[2], bs[2];
  matrix_strides(p.ta, p.ia.ld, as);
  matrix_strides(p.tb, p.ib.ld, bs);
  d.c_strides[r] = p.ic.ld;
  d.c_strides[r + 1] = 1;
  if (!p.swapped) {  // C [M][N] = A [M][K] B [K][N]
    d.m = plan.m, d.n = plan.n, d.k = plan.k;
    d.a_strides[r] = as[0], d.a_strides[r + 1] = as[1];
    d.b_strides[r] = bs[0], d.b_strides[r + 1] = bs[1];
  } else {  // C^T [N][M] = B^T [N][K] A^T [K][M]
    d.m = plan.n, d.n = plan.m, d.k = plan.k;
    d.a_strides[r] = bs[1], d.a_strides[r + 1] = bs[0];
    d.b_strides[r] = as[1], d.b_strides[r + 1] = as[0];
  }
  return d;
}

}  // namespace

bool onednn_in_place(const ExecSpace& space, Operand& a, Operand& b, const Shape& out_shape,
                     const Plan& plan, const Sizes& sizes, Precision precision, bool only_brgemm,
                     FView& out, const Sources& sources, const FView& into) {
  if constexpr (!host_space) {
    return false;
  } else {
    if (static_cast<int>(plan.batch.size()) > impl::onednn_max_batch)
      return false;
    const InPlaceProduct p = arrange_in_place(space, a, b, out_shape, plan, sizes);
    // Without a bf16 matmul on this CPU a forced oneDNN path multiplies the rounded values in f32.
    const bool bf16 = precision == Precision::bfloat16 && impl::onednn_has_bf16();
    if (precision == Precision::bfloat16 && !bf16)
      round_operands_to_bf16(space, a, b);
    impl::StridedMatmul d = describe(p, plan, bf16);
    // Accumulating (a sum post-op) straight into `into` when the result lies in out's order.
    d.accumulate = into.data() && p.c_shape == out_shape;
    const std::string chosen = impl::onednn_matmul_impl(d);
    if (chosen.empty() || chosen.rfind("ref", 0) == 0 ||
        (only_brgemm && chosen.rfind("brg", 0) != 0))
      return false;
    const char* where = "mtk::kernels::einsum";
    FView c = d.accumulate ? into : impl::alloc<float>(where, out_shape.num_elements());
    const void *ap = a.x.data(), *bp = b.x.data();
    Bits a16, b16;
    if (bf16) {
      // Unkept operands converted into buffers from the program's pool, held for this product
      // only (the memory prediction counts them as the step's scratch, mtk/lower/bf16_reuse.hpp).
      a16 = bf16_operand(space, a.x, sources.a, sources.reuse, false);
      b16 = bf16_operand(space, b.x, sources.b, sources.reuse, true);
      ap = a16.data();
      bp = b16.data();
    }
    if (p.swapped)
      std::swap(ap, bp);
    space.fence();
    Kokkos::Profiling::pushRegion("mtk::kernels::einsum oneDNN matmul");
    impl::onednn_matmul(d, ap, bp, c.data());
    Kokkos::Profiling::popRegion();
    out = p.c_shape == out_shape ? c : permuted(space, p.c_shape, c, out_shape);
    return true;
  }
}

}  // namespace mtk::kernels::einsum_impl
