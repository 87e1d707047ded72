// bfloat16 storage: widen, narrow and store in place (labelled kernels on the caller's space).
#include <mtk/base/error.hpp>
#include <mtk/kernels/bfloat16.hpp>
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/bfloat16_storage.hpp>
#include <mtk/kernels/impl/counter_random.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <Kokkos_Core.hpp>

#include <cstring>

namespace mtk::kernels {

FView widen_bfloat16(const ExecSpace& space, const BView& stored) {
  const auto n = static_cast<std::int64_t>(stored.extent(0));
  FView out = impl::alloc<float>("mtk::kernels::widen_bfloat16", n);
  Kokkos::parallel_for(
      "mtk::kernels::widen_bfloat16", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t k) { out(k) = from_bfloat16_bits(stored(k)); });
  return out;
}

BView narrow_bfloat16(const ExecSpace& space, const FView& x) {
  const auto n = static_cast<std::int64_t>(x.extent(0));
  BView out = impl::alloc<std::uint16_t>("mtk::kernels::narrow_bfloat16", n);
  convert_to_bfloat16_bits(space, "mtk::kernels::narrow_bfloat16", x.data(), out.data(), n);
  return out;
}

void store_bfloat16(const ExecSpace& space, const FView& x, float accumulate, const BView& stored) {
  const auto n = static_cast<std::int64_t>(stored.extent(0));
  if (static_cast<std::int64_t>(x.extent(0)) != n)
    fail("mtk::kernels::store_bfloat16",
         cat("'", x.label(), "' holds ", x.extent(0), " values, the bfloat16 storage '",
             stored.label(), "' ", n));
  Kokkos::parallel_for(
      "mtk::kernels::store_bfloat16", impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
        // One rounding of the float32 result, as Mesh-TF's cast of the updated value.
        const float v =
            accumulate == 0.f ? x(k) : from_bfloat16_bits(stored(k)) + accumulate * x(k);
        stored(k) = to_bfloat16_bits(v);
      });
}

namespace {

/// The bf16 bit pattern of `v` rounded stochastically with the 16 random bits `r`: r / 2^16 is
/// compared with the fraction of an ulp the low half holds (a carry rounds the magnitude up).
KOKKOS_INLINE_FUNCTION std::uint16_t to_bfloat16_bits_stochastic(float v, std::uint32_t r) {
  std::uint32_t u = 0;
  memcpy(&u, &v, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u)
    return to_bfloat16_bits(v);  // NaN quieted, infinities kept: as the nearest path
  return static_cast<std::uint16_t>((u + r) >> 16);
}

}  // namespace

void store_bfloat16_stochastic(const ExecSpace& space, const FView& x, float accumulate,
                               const BView& stored, const Shape& global_shape,
                               const Shape& local_shape, const std::vector<std::int64_t>& origin,
                               std::uint64_t seed, std::uint64_t counter) {
  const char* w = "mtk::kernels::store_bfloat16_stochastic";
  const auto n = static_cast<std::int64_t>(stored.extent(0));
  if (static_cast<std::int64_t>(x.extent(0)) != n || local_shape.num_elements() != n)
    fail(w, cat("'", x.label(), "' holds ", x.extent(0), " values, the bfloat16 storage '",
                stored.label(), "' ", n, ", the slice ", local_shape.to_string(), " ",
                local_shape.num_elements()));
  const random_detail::GlobalIndex gi =
      random_detail::global_index(w, global_shape, local_shape, origin);
  Kokkos::parallel_for(
      w, impl::Range(space, 0, n), KOKKOS_LAMBDA(std::int64_t k) {
        const float v =
            accumulate == 0.f ? x(k) : from_bfloat16_bits(stored(k)) + accumulate * x(k);
        const auto r = static_cast<std::uint32_t>(random_detail::bits(seed, gi(k), counter) >> 48);
        stored(k) = to_bfloat16_bits_stochastic(v, r);
      });
}

std::int64_t count_inexact_bfloat16(const ExecSpace& space, const FView& x) {
  const auto n = static_cast<std::int64_t>(x.extent(0));
  std::int64_t inexact = 0;
  Kokkos::parallel_reduce(
      "mtk::kernels::count_inexact_bfloat16", impl::Range(space, 0, n),
      KOKKOS_LAMBDA(std::int64_t k, std::int64_t & c) {
        const float v = x(k);
        if (v == v && round_to_bfloat16(v) != v)
          ++c;
      },
      inexact);
  return inexact;
}

}  // namespace mtk::kernels
