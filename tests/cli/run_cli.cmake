# SPDX-License-Identifier: MIT
# Runs one servelab command line and checks how it ends.
#   -DCOMMAND=<;-list>   the command and its arguments
#   -DEXPECT=ok|error    whether it must succeed or fail
#   -DMATCH=<regex>      must appear in stdout (ok) or stderr (error)
#   -DNAME, -DCLASS      the test's name and heading in the bad-input table
# A failing command must exit with status 1, print nothing on stdout (no partial
# output) and exactly one "servelab: error:" line on stderr.
# An argument @EMPTY@ is passed as an empty string (a CMake list cannot hold one).
string(FIND "${COMMAND}" "@EMPTY@" empty_at)
if(empty_at GREATER -1)
  # Through sh, each argument in single quotes, so that '' survives.
  set(quoted ${COMMAND})
  list(TRANSFORM quoted REPLACE "'" "'\\\\''")
  list(TRANSFORM quoted PREPEND "'")
  list(TRANSFORM quoted APPEND "'")
  list(TRANSFORM quoted REPLACE "^'@EMPTY@'$" "''")
  list(JOIN quoted " " line)
  execute_process(COMMAND sh -c "${line}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
else()
  execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
# The first check that fails names the problem; both streams follow it.
set(problem "")
if(EXPECT STREQUAL "ok")
  if(NOT rc EQUAL 0)
    set(problem "expected success, got exit ${rc}")
  elseif(NOT out MATCHES "${MATCH}")
    set(problem "stdout does not match '${MATCH}'")
  endif()
else()
  string(REGEX MATCHALL "servelab: error:" errors "${err}")
  list(LENGTH errors n)
  if(rc EQUAL 0)
    set(problem "expected failure, got exit 0")
  elseif(NOT rc EQUAL 1)
    set(problem "expected exit status 1, got ${rc}")
  elseif(NOT out STREQUAL "")
    set(problem "a failing command printed to stdout")
  elseif(NOT n EQUAL 1 OR NOT err MATCHES "${MATCH}")
    set(problem "expected one 'servelab: error:' line matching '${MATCH}'")
  endif()
endif()
if(problem)
  message(FATAL_ERROR "${problem}\nstdout:\n${out}\nstderr:\n${err}")
endif()
message(STATUS "ok: ${err}")
# tools/bad_input_table.py sets SERVELAB_BAD_INPUT_LOG and collects one line per failing case.
if(DEFINED ENV{SERVELAB_BAD_INPUT_LOG} AND EXPECT STREQUAL "error")
  string(REGEX MATCH "servelab: error: [^\n]*" line "${err}")
  string(REPLACE ";" " " shown "${COMMAND}")
  file(APPEND "$ENV{SERVELAB_BAD_INPUT_LOG}" "${CLASS}\t${NAME}\t${shown}\t${rc}\t${line}\n")
endif()
