#!/usr/bin/env bash
# MTK inside another CMake project (add_subdirectory): it must leave the parent's cache alone
# (no forced CMAKE_BUILD_TYPE), define no generic target names, build only its libraries by default,
# and give the parent the MTK:: targets.
#   subproject.sh CMAKE MTK_SOURCE_DIR WORK_DIR
set -euo pipefail
cmake="$1" mtk="$2" work="$3"
rm -rf "$work"
mkdir -p "$work/parent"
cat >"$work/parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.16)
project(Parent LANGUAGES C CXX)
add_subdirectory("$mtk" mtk)
foreach(generic IN ITEMS format format-check check test_main warnings)
  if(TARGET \${generic})
    message(FATAL_ERROR "MTK defined the generic target '\${generic}' in its parent")
  endif()
endforeach()
foreach(target IN ITEMS MTK::engine MTK::models MTK::io)
  if(NOT TARGET \${target})
    message(FATAL_ERROR "MTK did not define \${target}")
  endif()
endforeach()
foreach(off IN ITEMS mtk-lm1b mtk_mpi_test_main bench_einsum)
  if(TARGET \${off})
    message(FATAL_ERROR "MTK built '\${off}' by default as a subproject")
  endif()
endforeach()
CMAKE
"$cmake" -S "$work/parent" -B "$work/build" >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$work/build/CMakeCache.txt")"
if [ -n "$build_type" ]; then
  echo "subproject: MTK set the parent's CMAKE_BUILD_TYPE to '$build_type'" >&2
  exit 1
fi
echo "subproject: MTK configured inside a parent project without touching it"
