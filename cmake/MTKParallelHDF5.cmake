# Finds HDF5 (C) and insists that it is the parallel (MPI-IO) build: MTK's checkpoints are written
# collectively, and a serial HDF5 would silently serialise or fail at run time.
if(NOT DEFINED HDF5_PREFER_PARALLEL)
  set(HDF5_PREFER_PARALLEL TRUE)
endif()
find_package(HDF5 REQUIRED COMPONENTS C)

# The probe runs where MTK is built (C is enabled there); a project using the installed MTK gets
# the HDF5 MTK was configured and checked with.
get_property(_mtk_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if("C" IN_LIST _mtk_languages AND NOT MTK_HDF5_IS_PARALLEL)
set(_mtk_h5_probe "${CMAKE_BINARY_DIR}/CMakeFiles/mtk_h5_parallel_probe.c")
file(WRITE "${_mtk_h5_probe}" "#include <hdf5.h>\n#ifndef H5_HAVE_PARALLEL\n#error serial\n#endif\nint main(void){return 0;}\n")
try_compile(MTK_HDF5_IS_PARALLEL "${CMAKE_BINARY_DIR}/CMakeFiles/mtk_h5_probe"
  SOURCES "${_mtk_h5_probe}"
  CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${HDF5_C_INCLUDE_DIRS};${MPI_C_INCLUDE_DIRS}")
if(NOT MTK_HDF5_IS_PARALLEL)
  message(FATAL_ERROR
    "MTK: the HDF5 found (${HDF5_C_INCLUDE_DIRS}) is not parallel (H5_HAVE_PARALLEL is undefined). "
    "On Debian install libhdf5-mpich-dev (scripts/install-deps does); with Spack use hdf5+mpi.")
endif()
endif()

# An imported target, re-created by MTKConfig.cmake in projects that link the installed MTK::io.
if(NOT TARGET MTK::hdf5)
  add_library(MTK::hdf5 INTERFACE IMPORTED)
  set_target_properties(MTK::hdf5 PROPERTIES
    INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${HDF5_C_INCLUDE_DIRS}"
    INTERFACE_INCLUDE_DIRECTORIES "${HDF5_C_INCLUDE_DIRS}"
    INTERFACE_LINK_LIBRARIES "${HDF5_C_LIBRARIES};MPI::MPI_CXX"
    INTERFACE_COMPILE_DEFINITIONS "${HDF5_C_DEFINITIONS}")
endif()
