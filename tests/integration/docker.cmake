# The Docker image, built from the repository's Dockerfile (the CPU-only image, on a
# Debian 12 base made with debootstrap: no registry) and run for real: its programs and
# their libraries, the token, the health check, a run and its files, the dashboard,
# docker stop and start on the same volume, a resume, and two users mapped to accounts
# with only the capabilities compose adds, bob's run denied alice's files and the
# database, and without them the refusal (tests/docker/). It starts a
# dockerd of its own where none answers, and is skipped, saying why, where none can
# start. The longest test (most of it the image's build, which takes every core), it
# runs alone (RUN_SERIAL): beside it, the tests that wait on real processes raced with
# its load.
if(NOT TARGET ddpd)
  return()
endif()
find_program(DEBIAN_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH) # with python3-yaml
if(NOT DEBIAN_PYTHON3)
  set(DEBIAN_PYTHON3 ${Python3_EXECUTABLE})
endif()
add_test(NAME docker_image
         COMMAND ${DEBIAN_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/docker/test_docker_image.py
                 --source ${PROJECT_SOURCE_DIR} --build ${CMAKE_BINARY_DIR} --cmake ${CMAKE_COMMAND})
set_tests_properties(docker_image PROPERTIES TIMEOUT 2400 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
