# The two helpers every tests/**/*.cmake registers its tests with:
#   ddpd_c_test(NAME SOURCES... [LIBS ...] [TIMEOUT s])  a C unit test program
#       (tests/support/check.h); it links ddpd_trainer unless LIBS names what it links.
#   ddpd_py_cases(PREFIX SCRIPT [PYTHON exe] [ARGS ...] [EXCLUDE case...]
#                 [ENVIRONMENT var=value...] [TIMEOUT s] [SKIP_RETURN_CODE n]
#                 [SANITIZE [NOT_SANITIZED case...]])
#       one ctest test PREFIX<case> for each case_<case> function of a Python test
#       file, found by running `SCRIPT --list-cases` (tests/support/checks.py): a case is
#       written once, in its file. NOT_SANITIZED names cases of a SANITIZE file that run
#       in the normal build only: their sanitized run would repeat C code another
#       sanitized case of the file already runs (say which, where they are named).
# The label `sanitize` marks what scripts/test.sh runs again in the sanitizer build
# (build-sanitize/, ASan+UBSan): every C unit test, the fuzz tests, and the Python
# files registered with SANITIZE (the server's integration tests, the trainer's
# end-to-end tests).
find_package(Python3 REQUIRED COMPONENTS Interpreter)
# tests/support/: C tests include from it; Python tests import from it, on PYTHONPATH
# (every test's environment, set in tests/CMakeLists.txt once all are registered, and
# the --list-cases run below), never by editing sys.path.
set(DDPD_TEST_SUPPORT ${CMAKE_CURRENT_LIST_DIR}/support)

# The trainer the server's and the sweeps' integration tests hand ddpd (--trainer).
# DDPD_TESTS_TRAINER may name another build's ddp-trainer: scripts/test.sh names the
# normal build's for the sanitizer build, whose server tests check the server under
# ASan+UBSan while the trainer's own tests (trainer_e2e_*, trainer_cnn_e2e_*) check
# the trainer there. A sanitized trainer training every server test's runs made that
# pass some ten times slower (a CI timeout). Empty: this build's own.
set(DDPD_TESTS_TRAINER "" CACHE FILEPATH "the ddp-trainer of the server's integration tests (empty: this build's)")
if(DDPD_TESTS_TRAINER)
  if(NOT EXISTS ${DDPD_TESTS_TRAINER})
    message(FATAL_ERROR "DDPD_TESTS_TRAINER names no file: ${DDPD_TESTS_TRAINER} (build that build first, or leave it empty)")
  endif()
  set(DDPD_SERVER_TESTS_TRAINER ${DDPD_TESTS_TRAINER})
else()
  set(DDPD_SERVER_TESTS_TRAINER $<TARGET_FILE:ddp-trainer>)
endif()

# NO_SANITIZE: kept out of the sanitizer run (a test that measures glibc's own allocator,
# which the sanitizer's replaces).
function(ddpd_c_test name)
  cmake_parse_arguments(T "NO_SANITIZE" "TIMEOUT" "LIBS" ${ARGN})
  if(NOT T_LIBS)
    set(T_LIBS ddpd_trainer)
  endif()
  add_executable(${name} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  target_include_directories(${name} PRIVATE ${DDPD_TEST_SUPPORT})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "DDPD_TEST_DATA=${PROJECT_SOURCE_DIR}/tests/data;DDPD_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if(NOT T_NO_SANITIZE)
    set_tests_properties(${name} PROPERTIES LABELS sanitize)
  endif()
  if(T_TIMEOUT)
    set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  endif()
endfunction()

function(ddpd_py_cases prefix script)
  cmake_parse_arguments(P "SANITIZE" "PYTHON;TIMEOUT;SKIP_RETURN_CODE" "ARGS;EXCLUDE;ENVIRONMENT;NOT_SANITIZED" ${ARGN})
  if(NOT P_PYTHON)
    set(P_PYTHON ${Python3_EXECUTABLE})
  endif()
  if(NOT P_TIMEOUT)
    set(P_TIMEOUT 300)
  endif()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${DDPD_TEST_SUPPORT} ${P_PYTHON} ${script} --list-cases
                  OUTPUT_VARIABLE listed RESULT_VARIABLE rc ERROR_VARIABLE why)
  if(NOT rc EQUAL 0 OR listed STREQUAL "")
    message(FATAL_ERROR "${script} --list-cases did not list its cases (status ${rc}): ${why}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${script})
  string(STRIP "${listed}" listed)
  string(REPLACE "\n" ";" cases "${listed}")
  if(P_EXCLUDE)
    list(REMOVE_ITEM cases ${P_EXCLUDE})
  endif()
  foreach(case ${P_NOT_SANITIZED})
    if(NOT case IN_LIST cases)
      message(FATAL_ERROR "${script}: NOT_SANITIZED names ${case}, which is not one of its cases")
    endif()
  endforeach()
  foreach(case ${cases})
    add_test(NAME ${prefix}${case} COMMAND ${P_PYTHON} ${script} ${case} ${P_ARGS})
    set_tests_properties(${prefix}${case} PROPERTIES TIMEOUT ${P_TIMEOUT})
    if(P_ENVIRONMENT)
      set_tests_properties(${prefix}${case} PROPERTIES ENVIRONMENT "${P_ENVIRONMENT}")
    endif()
    if(P_SANITIZE AND NOT case IN_LIST P_NOT_SANITIZED)
      set_tests_properties(${prefix}${case} PROPERTIES LABELS sanitize)
    endif()
    if(P_SKIP_RETURN_CODE)
      set_tests_properties(${prefix}${case} PROPERTIES SKIP_RETURN_CODE ${P_SKIP_RETURN_CODE})
    endif()
  endforeach()
endfunction()
