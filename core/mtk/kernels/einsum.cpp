// mtk::kernels contractions, the entry (einsum.hpp): argument checks, presums, bf16 operands and
// the special cases that are elementwise work; the products themselves go through the dispatch
// layer (impl/einsum_spec.hpp, einsum/dispatch.cpp) to one of the bodies in einsum/. The layers
// follow Kokkos Kernels' gemm: KokkosBlas3_gemm.hpp (entry), impl/*_spec.hpp (dispatch),
// impl/*_impl.hpp (bodies).
//
// Two operands: dims of one input only and absent from out are summed first (reduce). The rest are
// batch (both inputs and out), M (a and out), N (b and out) and K (both inputs, not out).
//
// bfloat16 (docs/ops-and-lowering.md "bfloat16 contractions"): after the presums (float32), both
// operands are rounded to bf16 values once, so every path below sees the same bf16 operands and
// accumulates in float32: oneDNN's bf16 matmul or, emulated, the fp32 gemm give the same numbers
// up to the order of the float32 sums.
#include <mtk/base/checked.hpp>
#include <mtk/base/error.hpp>
#include <mtk/kernels/einsum.hpp>
#include <mtk/kernels/einsum_accumulate.hpp>
#include <mtk/kernels/elementwise.hpp>
#include <mtk/kernels/impl/einsum_in_place.hpp>
#include <mtk/kernels/impl/einsum_spec.hpp>
#include <mtk/kernels/impl/launch.hpp>
#include <mtk/kernels/impl/onednn_matmul.hpp>
#include <mtk/kernels/reduce.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace mtk::kernels {
namespace einsum_impl {
namespace {

// Whether x has a dim that neither the other operand nor out has (summed before the product).
bool summed_alone(const Shape& x, const Shape& other, const Shape& out) {
  for (const auto& d : x.dims())
    if (!other.contains(d.name) && !out.contains(d.name))
      return true;
  return false;
}

// Batched products of vectors are elementwise work, not matrix work: one gemm call per batch
// entry would dominate. No contraction: a broadcast multiply. Only a contraction (M and N empty):
// a multiply, then a sum over the contracted dims. An empty output or an empty sum: zeros. Returns
// false (and leaves `out` alone) when the contraction is matrix work.
bool is_special_case(const Shape& out_shape, const Plan& p) {
  return out_shape.num_elements() == 0 || p.k == 0 || (p.nb > 1 && p.k_in_a.empty()) ||
         (p.nb > 1 && p.m_dims.empty() && p.n_dims.empty());
}

bool special_case(const ExecSpace& space, const Operand& a, const Operand& b,
                  const Shape& out_shape, const Plan& p, FView& out) {
  const std::int64_t out_n = out_shape.num_elements();
  if (out_n == 0 || p.k == 0) {
    out = FView(std::string("mtk::kernels::einsum"), static_cast<size_t>(out_n));
    return true;
  }
  if (p.nb > 1 && p.k_in_a.empty()) {
    out = binary<float>(space, BinaryFn::multiply, a.shape, a.x, b.shape, b.x, out_shape);
    return true;
  }
  if (p.nb > 1 && p.m_dims.empty() && p.n_dims.empty()) {
    std::vector<Dimension> all = out_shape.dims();
    for (const auto& name : p.k_in_a)
      all.push_back(a.shape.dim(name));
    const Shape product_shape(all);
    FView prod =
        binary<float>(space, BinaryFn::multiply, a.shape, a.x, b.shape, b.x, product_shape);
    out = reduce<float>(space, ReduceFn::sum, product_shape, prod, out_shape);
    return true;
  }
  return false;
}

// `out` with the positions of its M dims holding them in a's order and those of its N dims in b's;
// `canonical`: [batch (out's order), M, N].
Shape in_operand_order(const Shape& out, const Shape& a, const Shape& b, bool canonical) {
  std::vector<Dimension> batch, m, n;
  for (const auto& d : a.dims())
    if (out.contains(d.name) && !b.contains(d.name))
      m.push_back(d);
  for (const auto& d : b.dims())
    if (out.contains(d.name) && !a.contains(d.name))
      n.push_back(d);
  if (canonical) {
    for (const auto& d : out.dims())
      if (a.contains(d.name) && b.contains(d.name))
        batch.push_back(d);
    batch.insert(batch.end(), m.begin(), m.end());
    batch.insert(batch.end(), n.begin(), n.end());
    return Shape(batch);
  }
  std::vector<Dimension> dims;
  size_t im = 0, in = 0;
  for (const auto& d : out.dims()) {
    const bool in_a = a.contains(d.name), in_b = b.contains(d.name);
    dims.push_back(in_a && in_b ? d : in_a ? m[im++] : n[in++]);
  }
  return Shape(dims);
}

// The shape the product is made in: out, or, where out orders an operand's M (N) dims otherwise
// than the operand does, so that the operand would be copied transposed, out with them in the
// operands' orders when that output is smaller than the copies it saves; it is permuted into out
// after (a convolution's filter gradient reads its [positions, channels, taps] patches in place
// and permutes its [taps, channels, channels] result, 1/500 of their size). An output that small
// is made as [batch, M, N], the gemm's own form (its transpose ran 2.5x slower there). `plan`
// follows.
Shape product_shape(const Shape& a, const Shape& b, const Shape& out, const Sizes& sizes,
                    Plan& plan) {
  const bool tiny = out.num_elements() * 64 <= a.num_elements() + b.num_elements();
  const Shape natural = in_operand_order(out, a, b, tiny);
  if (natural == out)
    return out;
  const Plan p = make_plan(a, b, natural, sizes);
  std::int64_t saved = 0;
  if (!stays_in_place(a, b, plan, sizes, false) && stays_in_place(a, b, p, sizes, false))
    saved += a.num_elements();
  if (!stays_in_place(a, b, plan, sizes, true) && stays_in_place(a, b, p, sizes, true))
    saved += b.num_elements();
  if (saved <= out.num_elements() && !tiny)
    return out;
  plan = p;
  return natural;
}

}  // namespace
}  // namespace einsum_impl

namespace einsum_impl {
namespace {

// The two-operand contraction behind einsum and einsum_accumulate: the result, which is `into`
// itself when a body accumulated into it.
FView two_operands(const ExecSpace& space, const Shape& a_shape, const FView& a_in,
                   const Shape& b_shape, const FView& b_in, const Shape& out_shape,
                   Precision precision, const Bf16Reuse* reuse, const FView& into) {
  const char* where = "mtk::kernels::einsum";
  check_size(where, a_shape, a_in, "operand a");
  check_size(where, b_shape, b_in, "operand b");
  const Sizes sizes = sizes_of(where, {&a_shape, &b_shape, &out_shape});
  for (const auto& d : out_shape.dims())
    if (!a_shape.contains(d.name) && !b_shape.contains(d.name))
      fail(where,
           cat("output dimension '", d.name, "' of ", out_shape.to_string(),
               " is in neither operand ", a_shape.to_string(), " nor ", b_shape.to_string()));

  Kokkos::Profiling::pushRegion(where);
  const Backend backend = choose_backend(precision);
  Operand a{a_shape, a_in}, b{b_shape, b_in};
  // An operand held only as its bf16 copy is read from it by oneDNN's bf16 matmul where it lies;
  // any other use (a presum, a transposed copy, another body) gets its values back first.
  const bool reads_copies = precision == Precision::bfloat16 &&
                            backend == Backend::onednn_in_place && impl::onednn_has_bf16();
  if (!reads_copies || summed_alone(a.shape, b.shape, out_shape))
    restore_gone_values(space, a, reuse);
  if (!reads_copies || summed_alone(b.shape, a.shape, out_shape))
    restore_gone_values(space, b, reuse);
  presum(space, a, b.shape, out_shape);
  presum(space, b, a.shape, out_shape);
  Plan plan = make_plan(a.shape, b.shape, out_shape, sizes);
  const bool special = is_special_case(out_shape, plan);
  // A body accumulating into `into` writes out's order.
  const Shape shape =
      special || into.data() ? out_shape : product_shape(a.shape, b.shape, out_shape, sizes, plan);
  if (special || !stays_in_place(a.shape, b.shape, plan, sizes, false))
    restore_gone_values(space, a, reuse);
  if (special || !stays_in_place(a.shape, b.shape, plan, sizes, true))
    restore_gone_values(space, b, reuse);
  // The oneDNN and cuBLAS bf16 bodies convert bf16 operands to bf16 storage themselves (the same
  // values).
  if (precision == Precision::bfloat16 && a.x.extent(0) > 0 && b.x.extent(0) > 0 &&
      (special || !converts_bf16_operands(backend)))
    round_operands_to_bf16(space, a, b);
  FView out;
  if (!special_case(space, a, b, out_shape, plan, out))
    out = contract(space, backend, a, b, shape, plan, sizes, precision,
                   reuse ? Sources{reuse, a_in.data(), b_in.data()} : Sources{}, into);
  if (shape != out_shape)
    out = permuted(space, shape, out, out_shape);
  Kokkos::Profiling::popRegion();
  return out;
}

}  // namespace
}  // namespace einsum_impl

FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& b_shape,
             const FView& b, const Shape& out_shape, Precision precision, const Bf16Reuse* reuse) {
  return einsum_impl::two_operands(space, a_shape, a, b_shape, b, out_shape, precision, reuse,
                                   FView());
}

void einsum_accumulate(const ExecSpace& space, const Shape& a_shape, const FView& a,
                       const Shape& b_shape, const FView& b, const Shape& out_shape,
                       const FView& into, Precision precision, const Bf16Reuse* reuse) {
  einsum_impl::check_size("mtk::kernels::einsum_accumulate", out_shape, into, "the sum 'into'");
  const FView r =
      einsum_impl::two_operands(space, a_shape, a, b_shape, b, out_shape, precision, reuse, into);
  if (r.data() == into.data())
    return;
  // No body could write into `into` (out's order, an elementwise case): add the result.
  Kokkos::parallel_for(
      "mtk::kernels::einsum_accumulate add", impl::Range(space, 0, out_shape.num_elements()),
      KOKKOS_LAMBDA(std::int64_t i) { into(i) += r(i); });
}

FView einsum(const ExecSpace& space, const Shape& a_shape, const FView& a, const Shape& out_shape) {
  using namespace einsum_impl;
  const char* where = "mtk::kernels::einsum";
  check_size(where, a_shape, a, "operand");
  sizes_of(where, {&a_shape, &out_shape});
  for (const auto& d : out_shape.dims())
    if (!a_shape.contains(d.name))
      fail(where, cat("output dimension '", d.name, "' of ", out_shape.to_string(),
                      " is not in operand ", a_shape.to_string()));
  return reduce(space, ReduceFn::sum, a_shape, a, out_shape);
}

std::int64_t einsum_moved_bytes(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape,
                                Precision precision) {
  using namespace einsum_impl;
  const Sizes sizes =
      sizes_of("mtk::kernels::einsum_moved_bytes", {&a_shape, &b_shape, &out_shape});
  std::int64_t copied = 0;
  // presum(): the dims only `x` has summed away first, reading it once.
  auto presummed = [&](const Shape& x, const Shape& other) {
    if (!summed_alone(x, other, out_shape))
      return x;
    copied += x.num_elements();
    std::vector<Dimension> kept;
    for (const auto& d : x.dims())
      if (other.contains(d.name) || out_shape.contains(d.name))
        kept.push_back(d);
    return Shape(kept);
  };
  const Shape a = presummed(a_shape, b_shape), b = presummed(b_shape, a_shape);
  Plan plan = make_plan(a, b, out_shape, sizes);
  const std::int64_t all = a.num_elements() + b.num_elements() + out_shape.num_elements();
  if (is_special_case(out_shape, plan))
    return 8 * copied + 4 * all;
  if (choose_backend(precision) == Backend::packed_kokkos_gemm)  // packs both, unpacks the result
    return 8 * (copied + all);
  const Shape shape = product_shape(a, b, out_shape, sizes, plan);
  if (!stays_in_place(a, b, plan, sizes, false))
    copied += a.num_elements();
  if (!stays_in_place(a, b, plan, sizes, true))
    copied += b.num_elements();
  if (!result_in_place(shape, plan, sizes))  // made as [batch, M, N], transposed into `shape`
    copied += out_shape.num_elements();
  if (shape != out_shape)  // then permuted into out
    copied += out_shape.num_elements();
  return 8 * copied;
}

std::int64_t einsum_macs(const Shape& a_shape, const Shape& b_shape, const Shape& out_shape) {
  const char* where = "mtk::kernels::einsum_macs";
  std::int64_t macs = 1;
  for (const auto& [name, size] : einsum_impl::sizes_of(where, {&a_shape, &b_shape, &out_shape}))
    macs = checked_mul(macs, size, where, [&] {
      return cat("the multiply-adds of ", a_shape.to_string(), " x ", b_shape.to_string(), " -> ",
                 out_shape.to_string());
    });
  return macs;
}

}  // namespace mtk::kernels
