#pragma once
// Allocation and launch policy shared by every kernel: labelled, uninitialised Views and ranges on
// the caller's execution space instance.

#include <mtk/base/exec_space.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace mtk::kernels::impl {

/// An uninitialised View of `n` elements named `label` (every kernel writes all of its output).
template <class T>
Kokkos::View<T*> alloc(const char* label, std::int64_t n) {
  return uninitialized_view<T>(label, n);
}

/// Whether kernels run on the host (plain loops over raw pointers vectorise there; teams suit
/// GPUs).
constexpr bool host_exec = Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;

/// [0, n) on `space`.
using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;

}  // namespace mtk::kernels::impl
