#pragma once
// The Kokkos execution space MTK's kernels run in, and how MTK allocates its Views. Kernels take an
// instance first (as Kokkos Kernels does), so a program can run on its own stream on GPUs.

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <string>

namespace mtk {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;

/// A labelled View of `n` elements left uninitialised: for buffers that are written whole before
/// they are read (kernel outputs, receive buffers, restored slices).
template <class T>
Kokkos::View<T*> uninitialized_view(const std::string& label, std::int64_t n) {
  return Kokkos::View<T*>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label),
                          static_cast<size_t>(n));
}

}  // namespace mtk
