# `cmake --install`: libraries, public headers (impl/ folders stay private), the exported MTK::
# targets, MTKConfig.cmake with its version file, the find modules it needs, and share/mtk: the
# applications' configs, the layout presets, the Slurm scripts and the plot tool. A project uses MTK with
#   find_package(MTK REQUIRED)   target_link_libraries(app PRIVATE MTK::io)   # or MTK::engine
include(CMakePackageConfigHelpers)
set(MTK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/MTK CACHE STRING
  "Where MTKConfig.cmake is installed, relative to the prefix")

install(TARGETS mtk_engine mtk_models mtk_io EXPORT MTKTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT MTKTargets NAMESPACE MTK:: DESTINATION ${MTK_INSTALL_CMAKEDIR})

configure_package_config_file(cmake/MTKConfig.cmake.in ${PROJECT_BINARY_DIR}/MTKConfig.cmake
  INSTALL_DESTINATION ${MTK_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/MTKConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/MTKConfig.cmake ${PROJECT_BINARY_DIR}/MTKConfigVersion.cmake
  cmake/MTKDependencies.cmake cmake/MTKKokkos.cmake cmake/MTKOneDNN.cmake cmake/MTKParallelHDF5.cmake
  DESTINATION ${MTK_INSTALL_CMAKEDIR})

# share/mtk has the source tree's layout for what the docs run, so that it works as MTK_ROOT:
# the batch scripts find scripts/slurm/mtk-job.sh and apps/<app>/configs/ under MTK_ROOT, and
# scripts/slurm/generate reads the configs relative to itself (docs/cluster.md, "Installing").
# tests/architecture/install_tree.sh checks the installed tree against this list.
set(MTK_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/mtk)
install(DIRECTORY layouts/ DESTINATION ${MTK_INSTALL_DATADIR}/layouts)
foreach(app lm1b wmt fmnist)
  install(DIRECTORY apps/${app}/configs/ DESTINATION ${MTK_INSTALL_DATADIR}/apps/${app}/configs)
endforeach()
install(DIRECTORY scripts/slurm/ DESTINATION ${MTK_INSTALL_DATADIR}/scripts/slurm
  USE_SOURCE_PERMISSIONS)
# plot-metrics draws metrics.jsonl; the corpus makers are what demo.sbatch runs (with lib/).
install(PROGRAMS scripts/plot-metrics scripts/make-demo-corpus scripts/make-wmt-demo-corpus
  DESTINATION ${MTK_INSTALL_DATADIR}/scripts)
install(DIRECTORY scripts/lib/ DESTINATION ${MTK_INSTALL_DATADIR}/scripts/lib
  USE_SOURCE_PERMISSIONS)
# The licence goes with every install (Apache-2.0, section 4(a)), with its coverage statement and
# the changelog.
install(FILES LICENSE NOTICE CHANGELOG.md DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/mtk)
