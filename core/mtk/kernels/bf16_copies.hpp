#pragma once
// bf16 copies of contraction operands kept from one bf16 contraction to the next, so that a
// tensor several contractions read (a weight in the forward and the backward, an output gradient
// in both of its gradient products, the logits' gradient) is converted to bf16 once per run
// instead of once per contraction. The lowered program (mtk/lower/bf16_reuse.hpp) decides which
// tensors to keep and when to drop their copies; a copy is found by its source's address and size.
// (kernels/bf16_copies.cpp)

#include <mtk/base/exec_space.hpp>
#include <mtk/kernels/view.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <map>

namespace mtk::kernels {

class Bf16Copies {
 public:
  using Bits = Kokkos::View<std::uint16_t*>;
  /// The copy of the `n` floats at `source`, or an empty View.
  Bits find(const float* source, std::int64_t n) const;
  /// find() for a holder that takes the copy over (mtk/lower/bf16_activations.hpp), not
  /// counted in hits().
  Bits take(const float* source, std::int64_t n) const;
  /// Keeps `bits` as the copy of the `n` floats at `source` (replacing an older one).
  /// `values_gone`: the bits lie in the first half of the floats' own storage, which holds no
  /// float32 values any more (a producer that writes only its output's bits,
  /// Program::bf16_bits_only): readers take the copy or widen it (einsum does), and its bytes are
  /// not counted.
  void keep(const float* source, std::int64_t n, Bits bits, bool values_gone = false);
  /// Whether the floats at `source` are gone and only their kept copy holds the values.
  bool values_gone(const float* source, std::int64_t n) const;
  /// Drops the copy of the floats at `source`, if any (its source is rewritten or freed).
  void forget(const void* source);
  /// Drops every copy (the end of a run).
  void clear();
  /// Bytes held now, and the most held at once since construction.
  std::int64_t bytes() const { return bytes_; }
  std::int64_t peak_bytes() const { return peak_bytes_; }
  /// Conversions saved since construction (finds that returned a copy).
  std::int64_t hits() const { return hits_; }

 private:
  struct Entry {
    std::int64_t n = 0;
    Bits bits;
    bool values_gone = false;
  };
  std::map<const void*, Entry> entries_;
  std::int64_t bytes_ = 0, peak_bytes_ = 0;
  mutable std::int64_t hits_ = 0;
};

/// What a bf16 contraction may do with its operands' copies: read them from `copies` and, where
/// keep_a / keep_b, leave the copy it makes there. Null: convert into scratch as always.
struct Bf16Reuse {
  Bf16Copies* copies = nullptr;
  bool keep_a = false, keep_b = false;
};

/// The bf16 bit patterns of contraction operand `x` (b where `second`, else a), for the bodies that
/// take bf16 storage (oneDNN, cuBLAS): the kept copy of its source when `reuse` has one, else `x`
/// converted into a new buffer that `reuse` keeps (when asked to), else into `*scratch` (grown
/// when too small) or, without scratch, a buffer from the program's pool. Only an operand still
/// at its caller's address (x.data() == source) is looked up or kept.
Bf16Copies::Bits bf16_operand(const ExecSpace& space, const FView& x, const float* source,
                              const Bf16Reuse* reuse, bool second,
                              Bf16Copies::Bits* scratch = nullptr);

}  // namespace mtk::kernels
