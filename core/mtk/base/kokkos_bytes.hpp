#pragma once
// Live and peak bytes of Kokkos allocations on this process (every tensor buffer MTK allocates),
// counted by the Kokkos Tools allocation callbacks: what the memory tests hold predictions to and
// what bench_lm_train reports as its Kokkos peak.

#include <Kokkos_Core.hpp>

#include <algorithm>
#include <cstdint>

namespace mtk {

/// KokkosBytes::start() installs the callbacks (they replace any others); from then on live() is
/// the bytes allocated and not yet freed, peak() the most live() has been since start() or reset().
struct KokkosBytes {
  static long long& live() {
    static long long n = 0;
    return n;
  }
  static long long& peak() {
    static long long n = 0;
    return n;
  }
  static void start() {
    Kokkos::Tools::Experimental::set_allocate_data_callback(
        [](Kokkos::Profiling::SpaceHandle, const char*, const void*, std::uint64_t size) {
          live() += static_cast<long long>(size);
          peak() = std::max(peak(), live());
        });
    Kokkos::Tools::Experimental::set_deallocate_data_callback(
        [](Kokkos::Profiling::SpaceHandle, const char*, const void*, std::uint64_t size) {
          live() -= static_cast<long long>(size);
        });
  }
  /// The peak from now on.
  static void reset() { peak() = live(); }
};

}  // namespace mtk
