# cmake -DSOURCE_DIR=... -DOUTPUT=... -P git_revision.cmake: writes OUTPUT defining
# MTK_GIT_REVISION ("" outside a git checkout), touching it only when the text changes.
set(revision "")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} describe --always --dirty --abbrev=12
    OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    set(revision "")
  endif()
endif()
set(text "#pragma once\n#define MTK_GIT_REVISION \"${revision}\"\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
