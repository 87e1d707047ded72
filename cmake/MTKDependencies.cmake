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
#   OpenSSL                OpenSSL::Crypto (SHA-256 of checkpoints and token shards, EVP)
#   nlohmann-json          nlohmann_json::nlohmann_json (header-only; metrics.jsonl, status.json,
#                          BLEU's JSON: MTK's own build only, private to MTK::io's sources)
#   xxHash >= 0.8          MTK::xxhash (MTKXxHash.cmake; header-only XXH3, token-shard checksums:
#                          MTK's own build only, private to MTK::io's sources)
#   oneDNN (optional)      MTK::onednn (MTKOneDNN.cmake; bfloat16 contractions)
#   CLI11                  CLI11::CLI11 (header-only; the tools in apps/ and bench/, not the
#                          libraries)
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
find_dependency(OpenSSL)
# MTK_IS_TOP_LEVEL is defined in MTK's own build (top level or subproject), not in a project
# using the installed MTK, whose static MTK::io carries no nlohmann-json (header-only, private).
if(DEFINED MTK_IS_TOP_LEVEL AND NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3.2 REQUIRED CONFIG)
endif()
if(DEFINED MTK_IS_TOP_LEVEL)
  include(${CMAKE_CURRENT_LIST_DIR}/MTKXxHash.cmake)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/MTKOneDNN.cmake)
# Only MTK's own build of its tools and benchmarks needs CLI11; a project using the installed
# libraries does not.
if((MTK_ENABLE_APPS OR MTK_ENABLE_BENCHMARKS) AND NOT TARGET CLI11::CLI11)
  find_package(CLI11 2.1 REQUIRED CONFIG)
endif()
