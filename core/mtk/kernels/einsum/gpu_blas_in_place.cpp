// einsum body on a GPU: one pointer-batched GPU BLAS call (cuBLAS, rocBLAS) with every operand and
// the result read and written in place through leading dims (the arrangement the host BLAS body
// uses, impl/einsum_in_place.hpp), so attention's [batch, length, heads, d_kv] operands need no
// transposed copies; bf16 operands converted whole (their layout kept; a weight's copy kept for
// the run where the program's bf16 reuse plan says so) and multiplied on the tensor cores.
#include <mtk/kernels/bf16_copies.hpp>
#include <mtk/kernels/impl/einsum_in_place.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/gpu_blas.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels::einsum_impl {
namespace {

// The batch's matrix addresses, in device memory: [0, nb) a's, [nb, 2 nb) b's, [2 nb, 3 nb) c's,
// each the base plus its entry's offset (in elements of `a_size` / `b_size` bytes; c float32).
Kokkos::View<std::uintptr_t*> addresses(const ExecSpace& space, const InPlaceProduct& p,
                                        std::int64_t nb, const void* a, std::int64_t a_size,
                                        const void* b, std::int64_t b_size, const float* c) {
  auto ptr = impl::alloc<std::uintptr_t>("mtk::kernels::einsum batch addresses", 3 * nb);
  const IndexMap ia = p.ia.batch, ib = p.ib.batch, ic = p.ic.batch;
  const auto a0 = reinterpret_cast<std::uintptr_t>(a), b0 = reinterpret_cast<std::uintptr_t>(b),
             c0 = reinterpret_cast<std::uintptr_t>(c);
  Kokkos::parallel_for(
      "mtk::kernels::einsum batch addresses", impl::Range(space, 0, nb),
      KOKKOS_LAMBDA(std::int64_t i) {
        ptr(i) = a0 + static_cast<std::uintptr_t>(ia.offset(i) * a_size);
        ptr(nb + i) = b0 + static_cast<std::uintptr_t>(ib.offset(i) * b_size);
        ptr(2 * nb + i) = c0 + static_cast<std::uintptr_t>(ic.offset(i)) * sizeof(float);
      });
  return ptr;
}

}  // namespace

FView gpu_blas_in_place(const ExecSpace& space, Operand a, Operand b, const Shape& out_shape,
                        const Plan& plan, const Sizes& sizes, const FView& into, bool bf16,
                        const Sources& sources) {
  const char* where = "mtk::kernels::einsum";
  const InPlaceProduct p = arrange_in_place(space, a, b, out_shape, plan, sizes);
  // Accumulating (beta = 1) straight into `into` when the result lies in out's order.
  const bool add = into.data() && p.c_shape == out_shape;
  FView c = add ? into : impl::alloc<float>(where, out_shape.num_elements());
  // Column-major BLAS sees a row-major matrix as its transpose: C = A B is computed as
  // C^T = B^T A^T; swapped (out holds C^T), as C = A B with both operands' transposes flipped.
  impl::PointerGemm g;
  g.nb = plan.nb;
  g.k = plan.k;
  g.ldc = p.ic.ld;
  g.beta = add ? 1.0f : 0.0f;
  g.ta = p.swapped ? flip(p.ta) : p.tb;
  g.tb = p.swapped ? flip(p.tb) : p.ta;
  g.m = p.swapped ? plan.m : plan.n;
  g.n = p.swapped ? plan.n : plan.m;
  g.lda = p.swapped ? p.ia.ld : p.ib.ld;
  g.ldb = p.swapped ? p.ib.ld : p.ia.ld;
  const std::int64_t nb = plan.nb;
  if (!bf16) {
    const auto ptr = addresses(space, p, nb, a.x.data(), 4, b.x.data(), 4, c.data());
    const auto* at = reinterpret_cast<const float* const*>(ptr.data());
    const auto* ct = reinterpret_cast<float* const*>(ptr.data() + 2 * nb);
    if (p.swapped)
      impl::gpu_blas_gemm_pointers(space, g, at, at + nb, ct);
    else
      impl::gpu_blas_gemm_pointers(space, g, at + nb, at, ct);
  } else {
    // Converted whole (layout kept), or the copy a bf16 reuse plan keeps of the source.
    const auto a16 = bf16_operand(space, a.x, sources.a, sources.reuse, false);
    const auto b16 = bf16_operand(space, b.x, sources.b, sources.reuse, true);
    const auto ptr = addresses(space, p, nb, a16.data(), 2, b16.data(), 2, c.data());
    const auto* at = reinterpret_cast<const std::uint16_t* const*>(ptr.data());
    const auto* ct = reinterpret_cast<float* const*>(ptr.data() + 2 * nb);
    if (p.swapped)
      impl::gpu_blas_gemm_pointers_bf16(space, g, at, at + nb, ct);
    else
      impl::gpu_blas_gemm_pointers_bf16(space, g, at + nb, at, ct);
  }
  if (!(p.c_shape == out_shape))
    c = permuted(space, p.c_shape, c, out_shape);
  return c;
}

}  // namespace mtk::kernels::einsum_impl
