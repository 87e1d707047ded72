# `cmake --install`: libraries, public headers (impl/ folders stay private), the exported MTK::
# targets, MTKConfig.cmake with its version file, the find modules it needs, the applications'
# configs and the layout presets. A project then uses MTK with
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

install(DIRECTORY layouts/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mtk/layouts)
install(DIRECTORY apps/lm1b/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mtk/configs/lm1b)
