# xxHash >= 0.8 (XXH3): the checksums of token shards (io/mtk/data/token_shards.cpp). Used
# header-only (XXH_INLINE_ALL in that one source): nothing is linked, so an installed MTK needs no
# xxHash. MTK_XXHASH_INCLUDE_DIR may point at the folder holding xxhash.h.
if(NOT TARGET MTK::xxhash)
  find_path(MTK_XXHASH_INCLUDE_DIR NAMES xxhash.h HINTS ${XXHASH_ROOT} $ENV{XXHASH_ROOT}
    PATH_SUFFIXES include)
  set(_mtk_xxhash_version "")
  if(MTK_XXHASH_INCLUDE_DIR)
    file(STRINGS "${MTK_XXHASH_INCLUDE_DIR}/xxhash.h" _mtk_xxhash_lines
      REGEX "^#define XXH_VERSION_(MAJOR|MINOR|RELEASE) +[0-9]+")
    foreach(_part MAJOR MINOR RELEASE)
      string(REGEX REPLACE ".*#define XXH_VERSION_${_part} +([0-9]+).*" "\\1" _mtk_xxhash_${_part}
        "${_mtk_xxhash_lines}")
    endforeach()
    set(_mtk_xxhash_version "${_mtk_xxhash_MAJOR}.${_mtk_xxhash_MINOR}.${_mtk_xxhash_RELEASE}")
  endif()
  if(NOT MTK_XXHASH_INCLUDE_DIR OR _mtk_xxhash_version VERSION_LESS 0.8.0)
    message(FATAL_ERROR "MTK needs xxHash >= 0.8.0 (XXH3, header xxhash.h) for the checksums of "
      "token shards; found "
      "${MTK_XXHASH_INCLUDE_DIR}${_mtk_xxhash_version}. Install it (Debian/Ubuntu: libxxhash-dev, "
      "Fedora: xxhash-devel, Spack: xxhash) or set MTK_XXHASH_INCLUDE_DIR to the folder holding "
      "xxhash.h (docs/building.md)")
  endif()
  message(STATUS "MTK: xxHash ${_mtk_xxhash_version} (header-only) in ${MTK_XXHASH_INCLUDE_DIR}")
  add_library(MTK::xxhash INTERFACE IMPORTED)
  set_target_properties(MTK::xxhash PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${MTK_XXHASH_INCLUDE_DIR}")
endif()
