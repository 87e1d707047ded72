#include <mtk/base/runtime_options.hpp>
#include <mtk/kernels/matmul_check.hpp>
#include <mtk/parallel/collective_wait.hpp>
#include <mtk/parallel/environment.hpp>
#include <mtk/parallel/mpi_interop.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <string>
#include <vector>

namespace mtk {

Environment::Environment(int& argc, char**& argv) {
  // First, before anything starts: a bad MTK_* value fails here, naming the variable.
  reload_runtime_options();
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(&argc, &argv);
    owns_mpi_ = true;
  }
  // Kokkos sees only its own options (--kokkos-*): it would answer an application's --help.
  std::vector<char*> kokkos_args = {argc > 0 ? argv[0] : nullptr};
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--kokkos", 0) == 0)
      kokkos_args.push_back(argv[i]);
  int kokkos_argc = static_cast<int>(kokkos_args.size());
  kokkos_args.push_back(nullptr);
  char** kokkos_argv = kokkos_args.data();
  Kokkos::initialize(kokkos_argc, kokkos_argv);
  set_collective_wait(choose_collective_wait(borrow(MPI_COMM_WORLD)));
  // A float32 matmul backend that is wrong on this CPU is never used (docs/numerics.md).
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  kernels::guard_fp32_matmuls(rank == 0);
}

Environment::~Environment() {
  Kokkos::finalize();
  if (owns_mpi_)
    MPI_Finalize();
}

const char* kokkos_description() {
  static const std::string text = "Kokkos " + std::to_string(KOKKOS_VERSION / 10000) + "." +
                                  std::to_string(KOKKOS_VERSION / 100 % 100) + "." +
                                  std::to_string(KOKKOS_VERSION % 100) + " (" +
                                  Kokkos::DefaultExecutionSpace::name() + ")";
  return text.c_str();
}

}  // namespace mtk
