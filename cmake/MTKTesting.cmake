# mtk_add_mpi_test(NAME <name> SOURCES <src...> [RANKS 1 2 4 8] [TIMEOUT s] [LIBRARIES ...])
# Builds one GoogleTest binary linked with the shared MPI main and registers it once per rank count
# as <name>_np<N> with label `mpi` (PROCESSORS N x MTK_TEST_THREADS). MPICH's hydra oversubscribes, so 8 ranks run on 2 cores; every
# test has a timeout so that a deadlock fails instead of hanging CI.
set(MTK_TEST_DEFAULT_RANKS 1 2 4 8 CACHE STRING "MPI rank counts each MPI test is registered at")
set(MTK_TEST_TIMEOUT 300 CACHE STRING "Default timeout in seconds of one MPI test")

# Threads per rank in every test (OMP_NUM_THREADS), so that a threaded Kokkos build (OpenMP,
# Threads) runs its threaded kernels under ctest. Default: OMP_NUM_THREADS of the configuring
# shell, else 1. Each test's PROCESSORS counts ranks x threads; when that exceeds the cores, or
# threads > 1, threads wait passively and are not pinned, so busy cores are not spun against.
if("$ENV{OMP_NUM_THREADS}" MATCHES "^[1-9][0-9]*$")
  set(_mtk_default_test_threads "$ENV{OMP_NUM_THREADS}")
else()
  set(_mtk_default_test_threads 1)
endif()
set(MTK_TEST_THREADS ${_mtk_default_test_threads} CACHE STRING
  "Threads per rank in tests (OMP_NUM_THREADS); default: OMP_NUM_THREADS at configure time, else 1")
if(NOT MTK_TEST_THREADS MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "MTK_TEST_THREADS must be a positive integer, not '${MTK_TEST_THREADS}'")
endif()
cmake_host_system_information(RESULT MTK_TEST_CORES QUERY NUMBER_OF_LOGICAL_CORES)

# mtk_set_test_environment(<test> <ranks>): PROCESSORS = ranks x MTK_TEST_THREADS and the thread
# environment (appended to any ENVIRONMENT the test already has). Every registered test calls it.
function(mtk_set_test_environment test ranks)
  math(EXPR procs "${ranks} * ${MTK_TEST_THREADS}")
  set(env "OPENBLAS_NUM_THREADS=1" "OMP_NUM_THREADS=${MTK_TEST_THREADS}")
  # Also with threads on enough cores: other tests (ctest -j) share them, and threads spinning at
  # barriers made 1-rank, 2-thread OpenMP tests 3-15x slower (test_copy_task past its timeout).
  if(procs GREATER MTK_TEST_CORES OR MTK_TEST_THREADS GREATER 1)
    list(APPEND env "OMP_WAIT_POLICY=passive" "OMP_PROC_BIND=false")
  endif()
  set_tests_properties(${test} PROPERTIES PROCESSORS ${procs})
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT ${env})
endfunction()

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
    set_tests_properties(${ARG_NAME}_np${n} PROPERTIES LABELS mpi TIMEOUT ${ARG_TIMEOUT})
    mtk_set_test_environment(${ARG_NAME}_np${n} ${n})
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
  set_tests_properties(${ARG_NAME} PROPERTIES LABELS unit TIMEOUT ${ARG_TIMEOUT})
  mtk_set_test_environment(${ARG_NAME} 1)
endfunction()

# mtk_add_cpu_class_tests(NAME <name> RANKS <n> [TIMEOUT <s>] COMMAND <command...>): the command
# again as on each other CPU class (tests/cpu_class/run_as.sh: avx2, avx2-onednn, avx512-blas),
# as tests <name>@<class> with label cpu-class; a class this CPU cannot run is skipped (exit 77).
function(mtk_add_cpu_class_tests)
  cmake_parse_arguments(ARG "" "NAME;RANKS;TIMEOUT" "COMMAND" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  foreach(class avx2 avx2-onednn avx512-blas)
    add_test(NAME ${ARG_NAME}@${class}
      COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cpu_class/run_as.sh ${class} ${ARG_COMMAND})
    set_tests_properties(${ARG_NAME}@${class} PROPERTIES LABELS cpu-class TIMEOUT ${ARG_TIMEOUT}
      SKIP_RETURN_CODE 77)
    mtk_set_test_environment(${ARG_NAME}@${class} ${ARG_RANKS})
  endforeach()
endfunction()

# mtk_add_cpu_class_mpi_test(<target> <ranks> [gtest arguments...]): an MPI GoogleTest binary at
# <ranks> ranks on each other CPU class.
function(mtk_add_cpu_class_mpi_test target ranks)
  mtk_add_cpu_class_tests(NAME ${target}_np${ranks} RANKS ${ranks} TIMEOUT 600
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:${target}> ${MPIEXEC_POSTFLAGS} ${ARGN})
endfunction()
