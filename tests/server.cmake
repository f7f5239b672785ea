# Server tests. C unit tests of the pieces that are pure logic (downsampling,
# migrations) and of the core modules (store, ingest parsing, feed, scheduler),
# then integration tests in Python (standard library only) that start a
# real ddpd on a free loopback port with a temporary state dir: the API and its
# errors, the cheap reads (cached answers, ETags), hostile and careless clients, the event socket with a scripted
# trainer, and end-to-end runs of the real ddp-trainer on Fashion-MNIST. Each Python case is its own ctest test: they run in
# parallel, and a failure names the case.
ddpd_c_test(test_downsample ${CMAKE_CURRENT_LIST_DIR}/server/test_downsample.c LIBS ddpd_server)
ddpd_c_test(test_migrate ${CMAKE_CURRENT_LIST_DIR}/server/test_migrate.c LIBS ddpd_server)
ddpd_c_test(test_run_status ${CMAKE_CURRENT_LIST_DIR}/server/test_run_status.c LIBS ddpd_server)

# C unit tests of the core modules through their public headers, on real parts: a
# SQLite file in a fresh temporary directory, the event socket, the supervisor's
# real child processes (a shell script as the trainer).
foreach(core_test test_store test_ingest_parse test_feed test_scheduler)
  ddpd_c_test(${core_test} ${CMAKE_CURRENT_LIST_DIR}/server/${core_test}.c LIBS ddpd_server)
endforeach()

set(server_test_args --ddpd $<TARGET_FILE:ddpd> --fake-trainer ${CMAKE_CURRENT_LIST_DIR}/server/fake_trainer.py)
if(TARGET ddp-trainer)
  list(APPEND server_test_args --trainer $<TARGET_FILE:ddp-trainer>)
endif()
ddpd_py_cases(server_api_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_api.py SANITIZE ARGS ${server_test_args} TIMEOUT 120)
ddpd_py_cases(server_ingest_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_ingest.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 180)
ddpd_py_cases(server_e2e_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_e2e.py SANITIZE ARGS ${server_test_args} TIMEOUT 300)
ddpd_py_cases(server_cache_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_cached_reads.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 120)
ddpd_py_cases(server_hostile_ ${CMAKE_CURRENT_LIST_DIR}/server/test_server_hostile.py SANITIZE ARGS ${server_test_args}
              TIMEOUT 180)
