# Trainer tests: C unit tests of the models (MLP and CNN gradients), optimizers, sampler and schedules, and
# end-to-end tests that run the real ddp-trainer binary on Fashion-MNIST.
ddpd_c_test(test_mlp_gradients ${CMAKE_CURRENT_LIST_DIR}/test_mlp_gradients.c)
ddpd_c_test(test_cnn_gradients ${CMAKE_CURRENT_LIST_DIR}/test_cnn_gradients.c)
ddpd_c_test(test_optim ${CMAKE_CURRENT_LIST_DIR}/test_optim.c)
ddpd_c_test(test_sampler ${CMAKE_CURRENT_LIST_DIR}/test_sampler.c)
ddpd_c_test(test_lr_schedule ${CMAKE_CURRENT_LIST_DIR}/test_lr_schedule.c)
ddpd_c_test(test_event_sink ${CMAKE_CURRENT_LIST_DIR}/test_event_sink.c)
ddpd_c_test(test_data_open ${CMAKE_CURRENT_LIST_DIR}/test_data_open.c)

find_package(Python3 REQUIRED COMPONENTS Interpreter)
set(TRAINER_E2E_CASES determinism world_sizes world_sizes_buckets resume lr_schedules bad_input rank_killed cancel
    launcher_killed eval_mode smoke_and_progress heartbeats cache_cut_short data_root_swapped hang_stopped_rank
    train_from_checkpoint step_profile)
foreach(case ${TRAINER_E2E_CASES})
  add_test(NAME trainer_e2e_${case}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/trainer/test_trainer_e2e.py ${case}
                   --trainer $<TARGET_FILE:ddp-trainer>)
  set_tests_properties(trainer_e2e_${case} PROPERTIES TIMEOUT 300)
endforeach()

# The CNN (model.type "cnn"), end to end: a small network on ~1000 examples, seconds a case.
set(TRAINER_CNN_E2E_CASES determinism world_sizes resume eval_mode dropout conv_backends bad_shape)
foreach(case ${TRAINER_CNN_E2E_CASES})
  add_test(NAME trainer_cnn_e2e_${case}
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/trainer/test_cnn_e2e.py ${case}
                   --trainer $<TARGET_FILE:ddp-trainer>)
  set_tests_properties(trainer_cnn_e2e_${case} PROPERTIES TIMEOUT 300)
endforeach()

ddpd_c_test(test_idx_cache ${CMAKE_CURRENT_LIST_DIR}/test_idx_cache.c)
# The end-to-end tests share one dataset cache in the build tree (not the user's).
foreach(case ${TRAINER_E2E_CASES})
  set_property(TEST trainer_e2e_${case} APPEND PROPERTY ENVIRONMENT "DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endforeach()
foreach(case ${TRAINER_CNN_E2E_CASES})
  set_property(TEST trainer_cnn_e2e_${case} APPEND PROPERTY ENVIRONMENT "DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache"
               "DDPD_BUILT_WITH_ONEDNN=${DDPD_HAVE_ONEDNN}")
endforeach()

# The reporters command runs' scripts report through: the `ddpd` Python module
# (reporter/python/ddpd), run with Debian's /usr/bin/python3 as users' scripts are,
# and the C header (reporter/c/ddpd_report.h), both against a real socket.
add_executable(report_c_demo ${CMAKE_CURRENT_LIST_DIR}/reporter/report_c_demo.c)
target_include_directories(report_c_demo PRIVATE ${PROJECT_SOURCE_DIR}/reporter/c)
target_link_libraries(report_c_demo PRIVATE m)
foreach(case outside_ddpd points_in_order server_restarts full_queue_drops c_header)
  add_test(NAME reporter_${case} COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/reporter/test_reporter.py ${case}
                                         --c-demo $<TARGET_FILE:report_c_demo>)
  set_tests_properties(reporter_${case} PROPERTIES TIMEOUT 120)
endforeach()
