# Operations: the server's log, metrics, auth, OpenAPI description, `ddpd check`
# and the Docker files (the pure logic's C unit test is unit/ops.cmake's): tests that
# start a real ddpd on a free loopback port (support/ddpd_harness.py) and check
# /metrics with promtool, the token and the loopback rule, the log file and its
# rotation, `ddpd check` and `--version`; a test that exercises every route of the
# real server (the real trainer on Fashion-MNIST) and validates each answer against
# schema/openapi.json; the same document under a standard linter (npm's
# @redocly/cli); the docs' samples against the real binaries; a test of the Dockerfile and compose file as text (no
# Docker engine needed: tests/docker builds and runs the image); and install-deps.sh's choices. Each case is its own
# ctest test.
if(NOT TARGET ddpd)
  return()
endif()

# The OpenAPI and Docker tests use Debian's python3-jsonschema and python3-yaml
# (scripts/install-deps.sh installs them): Debian's interpreter has them, whatever
# python3 comes first on PATH.
find_program(DEBIAN_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT DEBIAN_PYTHON3)
  set(DEBIAN_PYTHON3 ${Python3_EXECUTABLE})
endif()

set(ops_args --ddpd $<TARGET_FILE:ddpd> --fake-trainer ${DDPD_TEST_SUPPORT}/fake_trainer.py)
if(TARGET ddp-trainer)
  list(APPEND ops_args --trainer $<TARGET_FILE:ddp-trainer>)
endif()

ddpd_py_cases(ops_ ${CMAKE_CURRENT_LIST_DIR}/ops/test_ops_server.py ARGS ${ops_args} TIMEOUT 180)

add_test(NAME ops_openapi
         COMMAND ${DEBIAN_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/ops/test_openapi.py responses ${ops_args}
                 --openapi ${PROJECT_SOURCE_DIR}/schema/openapi.json --source ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_openapi PROPERTIES TIMEOUT 300)

# schema/openapi.json under npm's @redocly/cli (installed by scripts/install-deps.sh):
# lint clean, offline.
add_test(NAME ops_openapi_lint
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/ops/test_openapi_lint.py --source ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_openapi_lint PROPERTIES TIMEOUT 180)

# The docs' samples against the build: docs/operating.md's `ddpd check` sample against
# the real output of the installed binaries (cmake --install into a temporary prefix),
# the build/bin programs the docs name, and a checkpoint read as docs/using.md's PyTorch
# snippet reads it.
ddpd_py_cases(doc_samples_ ${CMAKE_CURRENT_LIST_DIR}/ops/test_doc_samples.py
              ARGS --source ${PROJECT_SOURCE_DIR} --build ${CMAKE_BINARY_DIR} --cmake ${CMAKE_COMMAND})

add_test(NAME ops_docker_files
         COMMAND ${DEBIAN_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/ops/test_docker_files.py ${PROJECT_SOURCE_DIR})
set_tests_properties(ops_docker_files PROPERTIES TIMEOUT 60)

# scripts/build.sh exits non-zero when compiling fails (a planted error in a small
# project built by the very script), and 0 when it does not.
ddpd_py_cases(build_script_ ${CMAKE_CURRENT_LIST_DIR}/ops/test_build_script.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 240)

# scripts/install-deps.sh's choices in each mode (build, test, runtime), against a
# stand-in archive of Debian 12's names and of Ubuntu 24.04's (NVIDIA's images' base,
# whose archive cannot be reached here): stand-ins for dpkg-query, apt-cache, apt-get
# and npm on PATH, the real script.
ddpd_py_cases(install_deps_ ${CMAKE_CURRENT_LIST_DIR}/ops/test_install_deps.py ARGS --source ${PROJECT_SOURCE_DIR}
              TIMEOUT 120)
