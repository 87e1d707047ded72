# oneDNN (optional): the bfloat16 matmul behind mtk::kernels::einsum on host execution spaces.
#   MTK_ENABLE_ONEDNN  AUTO (default: used when found), ON (required), OFF (never)
# Defines MTK::onednn (an imported library) and MTK_ONEDNN_FOUND. Found by header and library
# rather than with oneDNN's own package file, which on Debian also demands OpenCL for its GPU
# runtime. Private to MTK::engine's sources: no public header includes dnnl.hpp.
set(MTK_ENABLE_ONEDNN AUTO CACHE STRING "Use oneDNN for bfloat16 contractions: AUTO, ON or OFF")
set_property(CACHE MTK_ENABLE_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(_mtk_onednn_mode "${MTK_ENABLE_ONEDNN}")
if(DEFINED MTK_ONEDNN_MODE_OF_BUILD)  # installed MTK: exactly what it was built with
  set(_mtk_onednn_mode "${MTK_ONEDNN_MODE_OF_BUILD}")
endif()
set(MTK_ONEDNN_FOUND OFF)
if(TARGET MTK::onednn)
  set(MTK_ONEDNN_FOUND ON)
elseif(NOT _mtk_onednn_mode STREQUAL "OFF")
  find_path(MTK_ONEDNN_INCLUDE_DIR NAMES oneapi/dnnl/dnnl.hpp HINTS ${DNNL_ROOT} ${ONEDNN_ROOT}
    PATH_SUFFIXES include)
  find_library(MTK_ONEDNN_LIBRARY NAMES dnnl HINTS ${DNNL_ROOT} ${ONEDNN_ROOT}
    PATH_SUFFIXES lib lib64)
  if(MTK_ONEDNN_INCLUDE_DIR AND MTK_ONEDNN_LIBRARY)
    add_library(MTK::onednn UNKNOWN IMPORTED)
    set_target_properties(MTK::onednn PROPERTIES
      IMPORTED_LOCATION "${MTK_ONEDNN_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${MTK_ONEDNN_INCLUDE_DIR}")
    set(MTK_ONEDNN_FOUND ON)
  elseif(_mtk_onednn_mode STREQUAL "ON")
    message(FATAL_ERROR "MTK_ENABLE_ONEDNN=ON but oneDNN was not found (Debian: libdnnl-dev; "
                        "or set DNNL_ROOT)")
  endif()
endif()
