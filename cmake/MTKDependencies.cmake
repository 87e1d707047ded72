# Finds everything MTK builds against. Included by MTK's own build and, installed, by MTKConfig.cmake
# so that a project using find_package(MTK) re-finds the same packages (MTK's libraries are static,
# their private dependencies are part of the link).
#   MPI                    MPI::MPI_CXX
#   Kokkos, Kokkos Kernels Kokkos::kokkos, Kokkos::kokkoskernels (MTKKokkos.cmake mends Debian's)
#   parallel HDF5          MTK::hdf5 (MTKParallelHDF5.cmake)
#   yaml-cpp               yaml-cpp
#   SentencePiece          PkgConfig::SENTENCEPIECE
#   threads                Threads::Threads
#   zlib                   ZLIB::ZLIB (text corpora read plain or gzip-compressed)
#   oneDNN (optional)      MTK::onednn (MTKOneDNN.cmake; bfloat16 contractions)
#   CLI11                  CLI11::CLI11 (header-only; the tools in apps/ only, not the libraries)
include(CMakeFindDependencyMacro)
get_property(_mtk_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if("C" IN_LIST _mtk_languages)
  find_dependency(MPI COMPONENTS C CXX)
else()
  find_dependency(MPI COMPONENTS CXX)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/MTKKokkos.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/MTKParallelHDF5.cmake)
find_dependency(yaml-cpp)
find_dependency(PkgConfig)
if(NOT TARGET PkgConfig::SENTENCEPIECE)
  pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
endif()
find_dependency(Threads)
find_dependency(ZLIB)
include(${CMAKE_CURRENT_LIST_DIR}/MTKOneDNN.cmake)
# Only MTK's own build of its tools needs CLI11; a project using the installed libraries does not.
if(MTK_ENABLE_APPS AND NOT TARGET CLI11::CLI11)
  find_package(CLI11 2.1 REQUIRED CONFIG)
endif()
