# Server tests. C unit tests of the pieces that are pure logic (downsampling,
# migrations), then integration tests in Python (standard library only) that start a
# real ddpd on a free loopback port with a temporary state dir: the API and its
# errors, the cheap reads (cached answers, ETags), the event socket with a scripted
# trainer, and end-to-end runs of the real ddp-trainer on Fashion-MNIST.
foreach(server_test test_downsample test_migrate)
  add_executable(${server_test} ${CMAKE_CURRENT_LIST_DIR}/server/${server_test}.c)
  target_link_libraries(${server_test} PRIVATE ddpd_server)
  target_include_directories(${server_test} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  add_test(NAME ${server_test} COMMAND ${server_test})
endforeach()

find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(server_test_args --ddpd $<TARGET_FILE:ddpd> --fake-trainer ${CMAKE_CURRENT_LIST_DIR}/server/fake_trainer.py)
if(TARGET ddp-trainer)
  list(APPEND server_test_args --trainer $<TARGET_FILE:ddp-trainer>)
endif()

# Each case is its own ctest test: they run in parallel, and a failure names the case.
set(SERVER_API_CASES routes bad_configs pagination_and_delete token config_defaults)
set(SERVER_INGEST_CASES secret_and_malformed gpu_ranks downsampling exit_reasons cancel_and_grace shutdown queue_order)
set(SERVER_CACHE_CASES run_etags list_etags)
set(SERVER_E2E_CASES fmnist_two_ranks cancel_mid_run rank_killed three_runs_two_slots stale_running
    server_killed_mid_run)
foreach(case ${SERVER_API_CASES})
  add_test(NAME server_api_${case}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/server/test_server_api.py ${case} ${server_test_args})
  set_tests_properties(server_api_${case} PROPERTIES TIMEOUT 120)
endforeach()
foreach(case ${SERVER_CACHE_CASES})
  add_test(NAME server_cache_${case}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/server/test_server_cached_reads.py ${case} ${server_test_args})
  set_tests_properties(server_cache_${case} PROPERTIES TIMEOUT 120)
endforeach()
foreach(case ${SERVER_INGEST_CASES})
  add_test(NAME server_ingest_${case}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/server/test_server_ingest.py ${case} ${server_test_args})
  set_tests_properties(server_ingest_${case} PROPERTIES TIMEOUT 180)
endforeach()
foreach(case ${SERVER_E2E_CASES})
  add_test(NAME server_e2e_${case}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/server/test_server_e2e.py ${case} ${server_test_args})
  set_tests_properties(server_e2e_${case} PROPERTIES TIMEOUT 300)
endforeach()
