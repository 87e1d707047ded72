#pragma once
// Allocation and launch policy shared by every kernel: labelled, uninitialised Views and ranges on
// the caller's execution space instance.

#include <mtk/base/error.hpp>
#include <mtk/base/exec_space.hpp>

#include <Kokkos_Core.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
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

/// Set by tests to run the GPU-shaped kernels (device_paths) on the host too.
inline std::atomic<bool>& forced_device_paths() {
  static std::atomic<bool> forced{false};
  return forced;
}

/// Whether kernels take their GPU-shaped paths (many threads per output, a thread per element,
/// coalesced reads) instead of the host's (a thread per row or column, loops that vectorise):
/// always on a device, on the host where a test forces them.
inline bool device_paths() {
  return !host_exec || forced_device_paths().load(std::memory_order_relaxed);
}

/// A league of one team per row (the GPU forms of row reductions): `rows` as the int that
/// Kokkos::TeamPolicy takes, or an error naming `where`.
inline int team_league(const char* where, std::int64_t rows) {
  if (rows > std::numeric_limits<int>::max())
    fail(where, cat("too many rows (", rows, ") for a team each"));
  return static_cast<int>(rows);
}

/// [0, n) on `space`.
using Range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<std::int64_t>>;

}  // namespace mtk::kernels::impl
