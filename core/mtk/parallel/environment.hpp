#pragma once
// Start-up and shut-down of MPI and Kokkos, in the order they require.

namespace mtk {

/// Reads the run-time options (<mtk/base/runtime_options.hpp>: the MTK_* environment variables;
/// a bad value throws before anything starts), then MPI_Init (if nobody has yet), then
/// Kokkos::initialize, then the collectives' wait policy (mtk/parallel/collective_wait.hpp:
/// MTK_COLLECTIVE_WAIT, by default yielding the core where a node runs more ranks than it has
/// cores); the destructor finalizes Kokkos, then MPI (only if this object initialised it). Create
/// it first in main(); no Kokkos View may outlive it.
class Environment {
 public:
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

 private:
  bool owns_mpi_ = false;
};

/// Kokkos backend and version in one line, e.g. "Kokkos 3.4.1 (Serial)".
const char* kokkos_description();

}  // namespace mtk
