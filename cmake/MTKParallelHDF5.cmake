# Provides MTK::hdf5, the parallel (MPI-IO) HDF5 that MTK's checkpoints are written with: a serial
# HDF5 would silently serialise or fail at run time, so MTK's own configure checks for
# H5_HAVE_PARALLEL. A project using the installed MTK gets the very HDF5 MTK was configured and
# checked with (MTKConfig.cmake sets MTK_HDF5_INCLUDE_DIRS and friends): FindHDF5 needs the C
# language, which such a project need not enable.
if(NOT DEFINED MTK_HDF5_LIBRARIES)
  if(NOT DEFINED HDF5_PREFER_PARALLEL)
    set(HDF5_PREFER_PARALLEL TRUE)
  endif()
  find_package(HDF5 REQUIRED COMPONENTS C)
  set(_mtk_h5_probe "${CMAKE_BINARY_DIR}/CMakeFiles/mtk_h5_parallel_probe.c")
  file(WRITE "${_mtk_h5_probe}"
    "#include <hdf5.h>\n#ifndef H5_HAVE_PARALLEL\n#error serial\n#endif\nint main(void){return 0;}\n")
  try_compile(MTK_HDF5_IS_PARALLEL "${CMAKE_BINARY_DIR}/CMakeFiles/mtk_h5_probe"
    SOURCES "${_mtk_h5_probe}"
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${HDF5_C_INCLUDE_DIRS};${MPI_C_INCLUDE_DIRS}")
  if(NOT MTK_HDF5_IS_PARALLEL)
    message(FATAL_ERROR
      "MTK: the HDF5 found (${HDF5_C_INCLUDE_DIRS}) is not parallel (H5_HAVE_PARALLEL is undefined). "
      "On Debian install libhdf5-mpich-dev (scripts/install-deps does); with Spack use hdf5+mpi.")
  endif()
  set(MTK_HDF5_INCLUDE_DIRS "${HDF5_C_INCLUDE_DIRS}")
  set(MTK_HDF5_LIBRARIES "${HDF5_C_LIBRARIES}")
  set(MTK_HDF5_DEFINITIONS "${HDF5_C_DEFINITIONS}")
endif()

if(NOT TARGET MTK::hdf5)
  add_library(MTK::hdf5 INTERFACE IMPORTED)
  set_target_properties(MTK::hdf5 PROPERTIES
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${MTK_HDF5_INCLUDE_DIRS}"
    INTERFACE_INCLUDE_DIRECTORIES "${MTK_HDF5_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${MTK_HDF5_LIBRARIES};MPI::MPI_CXX"
    INTERFACE_COMPILE_DEFINITIONS "${MTK_HDF5_DEFINITIONS}")
endif()
