# Runs one servelab command line and checks how it ends.
#   -DCOMMAND=<;-list>   the command and its arguments
#   -DEXPECT=ok|error    whether it must succeed or fail
#   -DMATCH=<regex>      must appear in stdout (ok) or stderr (error)
# A failing command must exit non-zero, print nothing on stdout (no partial
# output) and exactly one "servelab: error:" line on stderr.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(EXPECT STREQUAL "ok")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "expected success, got exit ${rc}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if(NOT out MATCHES "${MATCH}")
    message(FATAL_ERROR "stdout does not match '${MATCH}':\n${out}")
  endif()
else()
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected failure, got exit 0\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "a failing command printed to stdout:\n${out}")
  endif()
  string(REGEX MATCHALL "servelab: error:" errors "${err}")
  list(LENGTH errors n)
  if(NOT n EQUAL 1 OR NOT err MATCHES "${MATCH}")
    message(FATAL_ERROR "expected one 'servelab: error:' line matching '${MATCH}', got:\n${err}")
  endif()
endif()
message(STATUS "ok: ${err}")
