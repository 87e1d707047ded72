#include <mtk_environment.hpp>

#include <Kokkos_Core.hpp>
#include <mpi.h>

#include <string>

namespace mtk {

Environment::Environment(int& argc, char**& argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    MPI_Init(&argc, &argv);
    owns_mpi_ = true;
  }
  Kokkos::initialize(argc, argv);
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
