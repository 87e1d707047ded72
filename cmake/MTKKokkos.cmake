# Finds Kokkos and Kokkos Kernels and presents them as Kokkos::kokkos and Kokkos::kokkoskernels.
#
# Standalone installs (Spack, Kokkos >= 4) provide both targets already. Debian's Trilinos packaging
# (Kokkos 3.4) has two known defects that are mended here and nowhere else:
#   1. Kokkos::kokkos lists a non-existent include directory (<prefix>/lib/include) instead of
#      /usr/include/trilinos;
#   2. Kokkos Kernels exports `trilinos_kokkoskernels`, not Kokkos::kokkoskernels.
# MTK_KOKKOS*_HINT: set by an installed MTKConfig.cmake to what MTK was built with.
find_package(Kokkos REQUIRED CONFIG HINTS ${MTK_KOKKOS_HINT})
find_package(KokkosKernels REQUIRED CONFIG HINTS ${MTK_KOKKOSKERNELS_HINT})

if(NOT TARGET Kokkos::kokkos)
  message(FATAL_ERROR "MTK: the Kokkos package found at ${Kokkos_DIR} defines no Kokkos::kokkos target")
endif()

# Defect 1: keep only include directories that exist, and add the ones the package announces.
get_target_property(_mtk_kokkos_incs Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
set(_mtk_kokkos_fixed_incs "")
foreach(_dir IN LISTS _mtk_kokkos_incs Kokkos_INCLUDE_DIRS)
  if(_dir MATCHES "^\\$<" OR EXISTS "${_dir}")
    list(APPEND _mtk_kokkos_fixed_incs "${_dir}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _mtk_kokkos_fixed_incs)
set_target_properties(Kokkos::kokkos PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_mtk_kokkos_fixed_incs}")

# Defect 2: alias the Trilinos-named Kokkos Kernels target.
if(NOT TARGET Kokkos::kokkoskernels)
  if(TARGET trilinos_kokkoskernels)
    add_library(Kokkos::kokkoskernels INTERFACE IMPORTED)
    set_target_properties(Kokkos::kokkoskernels PROPERTIES
      INTERFACE_LINK_LIBRARIES "trilinos_kokkoskernels;Kokkos::kokkos"
      INTERFACE_INCLUDE_DIRECTORIES "${KokkosKernels_INCLUDE_DIRS}")
  else()
    message(FATAL_ERROR "MTK: Kokkos Kernels at ${KokkosKernels_DIR} defines neither "
                        "Kokkos::kokkoskernels nor trilinos_kokkoskernels")
  endif()
endif()

if(DEFINED Kokkos_VERSION)
  set(MTK_KOKKOS_VERSION "${Kokkos_VERSION}")
else()
  set(MTK_KOKKOS_VERSION "unknown")
endif()
message(STATUS "MTK: Kokkos ${MTK_KOKKOS_VERSION} from ${Kokkos_DIR}; Kokkos Kernels from ${KokkosKernels_DIR}")
