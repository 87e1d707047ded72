// einsum body: bfloat16 operands rounded once (impl/einsum_spec.hpp). After the presums (float32),
// both operands are rounded to bf16 values, kept as floats in buffers reused from call to call on
// the host, so every body (transposed copies, elementwise products, gemm, oneDNN) sees the same
// bf16 operands: oneDNN's bf16 conversion of them is exact, and the fp32 gemm multiplies them
// exactly and sums in float32.
#include <mtk/kernels/bf16_copies.hpp>
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/bfloat16_storage.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>

namespace mtk::kernels::einsum_impl {
namespace {

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
  round_values_to_bfloat16(space, "mtk::kernels::einsum bf16 rounding", x.data(), out.data(), n);
  return out;
}

}  // namespace

void restore_gone_values(const ExecSpace& space, Operand& op, const Bf16Reuse* reuse) {
  const auto n = static_cast<std::int64_t>(op.x.extent(0));
  if (!reuse || !reuse->copies || !reuse->copies->values_gone(op.x.data(), n))
    return;
  op.x = widen_bfloat16(space, reuse->copies->take(op.x.data(), n));
}

void round_operands_to_bf16(const ExecSpace& space, Operand& a, Operand& b) {
  a.x = rounded(space, a.x, round_buffers().a);
  b.x = rounded(space, b.x, round_buffers().b);
}

}  // namespace mtk::kernels::einsum_impl
