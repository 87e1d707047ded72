#pragma once
// The Kokkos execution space MTK's kernels run in, and how MTK allocates its Views. Kernels take an
// instance first (as Kokkos Kernels does), so a program can run on its own stream on GPUs.

#include <mtk/base/allocation.hpp>
#include <mtk/base/buffer_pool.hpp>
#include <mtk/base/error.hpp>

#include <Kokkos_Core.hpp>

#include <cstdint>
#include <exception>
#include <string>

namespace mtk {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;

/// A labelled View of `n` elements left uninitialised: for buffers that are written whole before
/// they are read (kernel outputs, receive buffers, restored slices). Inside a program's run it
/// comes from the program's BufferPool (a buffer of the previous run that nothing holds any more).
/// A failed allocation is MTK's error naming the label, the bytes and the rank
/// (base/allocation.hpp).
template <class T>
Kokkos::View<T*> uninitialized_view(const std::string& label, std::int64_t n) {
  try {
    if (BufferPool* pool = BufferPool::active())
      return pool->acquire<T>(label, n);
    return Kokkos::View<T*>(Kokkos::view_alloc(Kokkos::WithoutInitializing, label),
                            static_cast<size_t>(n));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    allocation_failed(label, n * static_cast<std::int64_t>(sizeof(T)), e.what());
  }
}

}  // namespace mtk
