// kernels/bf16_copies.hpp
#include <mtk/kernels/bf16_copies.hpp>
#include <mtk/kernels/bfloat16_convert.hpp>
#include <mtk/kernels/impl/launch.hpp>

#include <algorithm>
#include <string>

namespace mtk::kernels {

Bf16Copies::Bits Bf16Copies::find(const float* source, std::int64_t n) const {
  const auto it = entries_.find(source);
  if (it == entries_.end() || it->second.n != n)
    return {};
  ++hits_;
  return it->second.bits;
}

Bf16Copies::Bits Bf16Copies::take(const float* source, std::int64_t n) const {
  const auto it = entries_.find(source);
  return it == entries_.end() || it->second.n != n ? Bits() : it->second.bits;
}

bool Bf16Copies::values_gone(const float* source, std::int64_t n) const {
  const auto it = entries_.find(source);
  return it != entries_.end() && it->second.n == n && it->second.values_gone;
}

namespace {

std::int64_t held_bytes(const Bf16Copies::Bits& bits, bool values_gone) {
  return values_gone ? 0 : static_cast<std::int64_t>(bits.extent(0) * sizeof(std::uint16_t));
}

}  // namespace

void Bf16Copies::keep(const float* source, std::int64_t n, Bits bits, bool values_gone) {
  forget(source);
  bytes_ += held_bytes(bits, values_gone);
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  entries_[source] = Entry{n, std::move(bits), values_gone};
}

void Bf16Copies::forget(const void* source) {
  const auto it = entries_.find(source);
  if (it == entries_.end())
    return;
  bytes_ -= held_bytes(it->second.bits, it->second.values_gone);
  entries_.erase(it);
}

void Bf16Copies::clear() {
  entries_.clear();
  bytes_ = 0;
}

namespace {

using Bits = Bf16Copies::Bits;

void convert(const ExecSpace& space, const FView& x, const Bits& out) {
  convert_to_bfloat16_bits(space, "mtk::kernels::einsum bf16 conversion", x.data(), out.data(),
                           static_cast<std::int64_t>(x.extent(0)));
}

// x as bf16 bit patterns in `*scratch` (grown when too small), or in a buffer from the pool.
Bits to_bits(const ExecSpace& space, const FView& x, Bits* scratch) {
  const auto n = static_cast<std::int64_t>(x.extent(0));
  if (!scratch) {
    const Bits out = impl::alloc<std::uint16_t>("mtk::kernels::einsum bf16 operand", n);
    convert(space, x, out);
    return out;
  }
  if (static_cast<std::int64_t>(scratch->extent(0)) < n) {
    *scratch = Bits();  // free before allocating the larger one
    *scratch = Bits(Kokkos::view_alloc(std::string("mtk::kernels::einsum bf16 operand"),
                                       Kokkos::WithoutInitializing),
                    static_cast<size_t>(n));
  }
  convert(space, x, *scratch);
  return *scratch;
}

}  // namespace

Bits bf16_operand(const ExecSpace& space, const FView& x, const float* source,
                  const Bf16Reuse* reuse, bool second, Bits* scratch) {
  const auto n = static_cast<std::int64_t>(x.extent(0));
  if (!reuse || !reuse->copies || x.data() != source)
    return to_bits(space, x, scratch);
  if (Bits kept = reuse->copies->find(source, n); kept.data())
    return kept;
  if (!(second ? reuse->keep_b : reuse->keep_a))
    return to_bits(space, x, scratch);
  // From the program's buffer pool: the same sizes come back every run.
  const Bits own = impl::alloc<std::uint16_t>("mtk::kernels::einsum bf16 operand copy", n);
  convert(space, x, own);
  reuse->copies->keep(source, n, own);
  return own;
}

}  // namespace mtk::kernels
