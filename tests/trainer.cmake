# Trainer tests: C unit tests of the models (MLP and CNN gradients), optimizers, sampler and schedules, and
# end-to-end tests that run the real ddp-trainer binary on Fashion-MNIST.
ddpd_c_test(test_mlp_gradients ${CMAKE_CURRENT_LIST_DIR}/test_mlp_gradients.c)
ddpd_c_test(test_cnn_gradients ${CMAKE_CURRENT_LIST_DIR}/test_cnn_gradients.c)
ddpd_c_test(test_optim ${CMAKE_CURRENT_LIST_DIR}/test_optim.c)
ddpd_c_test(test_host_plan ${CMAKE_CURRENT_LIST_DIR}/test_host_plan.c NO_SANITIZE) # glibc malloc statistics
ddpd_c_test(test_sampler ${CMAKE_CURRENT_LIST_DIR}/test_sampler.c)
ddpd_c_test(test_lr_schedule ${CMAKE_CURRENT_LIST_DIR}/test_lr_schedule.c)
# The optimizers and schedules against torch.optim and torch.optim.lr_scheduler
# themselves (Debian's python3-torch): optim_replay runs the trainer's code over the
# parameters and gradients the test gives it.
add_executable(optim_replay ${CMAKE_CURRENT_LIST_DIR}/trainer/optim_replay.c)
target_link_libraries(optim_replay PRIVATE ddpd_trainer)
ddpd_py_cases(optim_torch_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_optim_torch.py PYTHON /usr/bin/python3
              ARGS --replay $<TARGET_FILE:optim_replay> SKIP_RETURN_CODE 77 TIMEOUT 120)
ddpd_c_test(test_event_sink ${CMAKE_CURRENT_LIST_DIR}/test_event_sink.c)
ddpd_c_test(test_log_cap ${CMAKE_CURRENT_LIST_DIR}/test_log_cap.c)
ddpd_c_test(test_data_open ${CMAKE_CURRENT_LIST_DIR}/test_data_open.c)

ddpd_c_test(test_idx_cache ${CMAKE_CURRENT_LIST_DIR}/test_idx_cache.c)

# The end-to-end tests share one dataset cache in the build tree (not the user's).
ddpd_py_cases(trainer_e2e_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_trainer_e2e.py SANITIZE
              ARGS --trainer $<TARGET_FILE:ddp-trainer> ENVIRONMENT DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache)
# Its restarts (distributed.max_restarts): a rank killed once, the run bit-identical.
ddpd_py_cases(trainer_restarts_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_trainer_restarts.py SANITIZE
              ARGS --trainer $<TARGET_FILE:ddp-trainer> ENVIRONMENT DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache)
# The CNN (model.type "cnn"), end to end: a small network on ~1000 examples, seconds a case.
ddpd_py_cases(trainer_cnn_e2e_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_cnn_e2e.py SANITIZE
              ARGS --trainer $<TARGET_FILE:ddp-trainer>
              ENVIRONMENT DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache DDPD_BUILT_WITH_ONEDNN=${DDPD_HAVE_ONEDNN})

# The reporters command runs' scripts report through: the `ddpd` Python module
# (reporter/python/ddpd), run with Debian's /usr/bin/python3 as users' scripts are,
# and the C header (reporter/c/ddpd_report.h), both against a real socket.
add_executable(report_c_demo ${CMAKE_CURRENT_LIST_DIR}/reporter/report_c_demo.c)
target_include_directories(report_c_demo PRIVATE ${PROJECT_SOURCE_DIR}/reporter/c)
target_link_libraries(report_c_demo PRIVATE m)
ddpd_py_cases(reporter_ ${CMAKE_CURRENT_LIST_DIR}/reporter/test_reporter.py PYTHON /usr/bin/python3
              ARGS --c-demo $<TARGET_FILE:report_c_demo> --cmake ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR}
                   --python-install-dir ${DDPD_PYTHON_INSTALL_DIR} TIMEOUT 300)
