# mtk_add_mpi_test(NAME <name> SOURCES <src...> [RANKS 1 2 4 8] [TIMEOUT s] [LIBRARIES ...])
# Builds one GoogleTest binary linked with the shared MPI main and registers it once per rank count
# as <name>_np<N> with label `mpi`. MPICH's hydra oversubscribes, so 8 ranks run on 2 cores; every
# test has a timeout so that a deadlock fails instead of hanging CI.
set(MTK_TEST_DEFAULT_RANKS 1 2 4 8 CACHE STRING "MPI rank counts each MPI test is registered at")
set(MTK_TEST_TIMEOUT 300 CACHE STRING "Default timeout in seconds of one MPI test")

function(mtk_add_mpi_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SOURCES;RANKS;LIBRARIES" ${ARGN})
  if(NOT ARG_RANKS)
    set(ARG_RANKS ${MTK_TEST_DEFAULT_RANKS})
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT ${MTK_TEST_TIMEOUT})
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE mtk_mpi_test_main ${ARG_LIBRARIES})
  mtk_target_warnings(${ARG_NAME})
  foreach(n IN LISTS ARG_RANKS)
    add_test(NAME ${ARG_NAME}_np${n}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} ${MPIEXEC_PREFLAGS}
              $<TARGET_FILE:${ARG_NAME}> ${MPIEXEC_POSTFLAGS})
    set_tests_properties(${ARG_NAME}_np${n} PROPERTIES
      LABELS mpi PROCESSORS ${n} TIMEOUT ${ARG_TIMEOUT}
      ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
  endforeach()
endfunction()

# mtk_add_serial_test(NAME <name> SOURCES <src...> [LIBRARIES ...]): a plain GoogleTest binary.
function(mtk_add_serial_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE mtk_mpi_test_main ${ARG_LIBRARIES})
  mtk_target_warnings(${ARG_NAME})
  add_test(NAME ${ARG_NAME} COMMAND $<TARGET_FILE:${ARG_NAME}>)
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS unit TIMEOUT ${ARG_TIMEOUT}
    ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endfunction()
