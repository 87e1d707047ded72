// kernels/bf16_copies.hpp
#include <mtk/kernels/bf16_copies.hpp>

#include <algorithm>

namespace mtk::kernels {

Bf16Copies::Bits Bf16Copies::find(const float* source, std::int64_t n) const {
  const auto it = entries_.find(source);
  if (it == entries_.end() || it->second.n != n)
    return {};
  ++hits_;
  return it->second.bits;
}

void Bf16Copies::keep(const float* source, std::int64_t n, Bits bits) {
  forget(source);
  bytes_ += static_cast<std::int64_t>(bits.extent(0) * sizeof(std::uint16_t));
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  entries_[source] = Entry{n, std::move(bits)};
}

void Bf16Copies::forget(const void* source) {
  const auto it = entries_.find(source);
  if (it == entries_.end())
    return;
  bytes_ -= static_cast<std::int64_t>(it->second.bits.extent(0) * sizeof(std::uint16_t));
  entries_.erase(it);
}

void Bf16Copies::clear() {
  entries_.clear();
  bytes_ = 0;
}

}  // namespace mtk::kernels
