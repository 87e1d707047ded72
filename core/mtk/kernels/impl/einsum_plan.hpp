#pragma once
// einsum's planning (kernels/einsum/plan.cpp): dim names and sizes, the batch / M / N / K classes
// of a two-operand contraction, memory orders, presums and transposed copies. Shared by the entry
// (kernels/einsum.cpp), the dispatch layer (impl/einsum_spec.hpp) and the bodies.

#include <mtk/base/exec_space.hpp>
#include <mtk/base/shape.hpp>
#include <mtk/kernels/view.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace mtk::kernels::einsum_impl {

using Names = std::vector<std::string>;
using Sizes = std::map<std::string, std::int64_t>;

/// Whether einsum's memory is host memory (the host BLAS and oneDNN read it directly).
constexpr bool host_space = Kokkos::SpaceAccessibility<Kokkos::HostSpace, MemSpace>::accessible;

/// One operand: its local shape and values.
struct Operand {
  Shape shape;
  FView x;
};

/// The dims of a two-operand contraction by class, each in its operand's or out's order: batch
/// (both inputs and out), M (a and out), N (b and out), K (both inputs, not out: `k_in_a` in a's
/// order, `k_in_b` in b's). nb, m, n, k: the products of their sizes.
struct Plan {
  Names batch, m_dims, n_dims, k_in_a, k_in_b;
  std::int64_t nb = 1, m = 1, n = 1, k = 1;
};

/// Fails when `v` does not hold `s.num_elements()` values.
void check_size(const char* where, const Shape& s, const FView& v, const char* what);
/// Every name's size, checking that all shapes agree.
Sizes sizes_of(const char* where, const std::vector<const Shape*>& shapes);
/// The shape of `names` (each in `sizes`).
Shape shape_of(const Names& names, const Sizes& sizes);
Names concat(std::initializer_list<const Names*> parts);
std::int64_t product(const Names& names, const Sizes& sizes);
/// Whether `s` is stored in the order `names` (a permutation of its dims): size-1 dims do not
/// affect the memory order and are ignored.
bool stored_as(const Shape& s, const Names& names);

/// Sums the dims of `op` that are in neither `other` nor `out`.
void presum(const ExecSpace& space, Operand& op, const Shape& other, const Shape& out);
/// The dim classes of a x b -> out (after the presums).
Plan make_plan(const Shape& a, const Shape& b, const Shape& out, const Sizes& sizes);

/// x (shape `in`) copied into the dim order of `out` (the same dims, permuted).
FView permuted(const ExecSpace& space, const Shape& in, const FView& x, const Shape& out);

/// 'N' <-> 'T'.
inline char flip(char t) {
  return t == 'N' ? 'T' : 'N';
}
/// `n` as a BLAS int, or an error naming `what`.
int blas_int(const char* where, std::int64_t n, const char* what);

}  // namespace mtk::kernels::einsum_impl
