#pragma once
// The Kokkos execution space MTK's kernels run in. Kernels take an instance first (as Kokkos
// Kernels does), so a program can run on its own stream on GPUs.

#include <Kokkos_Core.hpp>

namespace mtk {

using ExecSpace = Kokkos::DefaultExecutionSpace;
using MemSpace = ExecSpace::memory_space;

}  // namespace mtk
