# The trainer's C unit tests: the models (MLP and CNN gradients), optimizers, sampler and
# schedules, the host memory plan, its event sink and log cap, and its data files.
ddpd_c_test(test_mlp_gradients ${CMAKE_CURRENT_LIST_DIR}/trainer/test_mlp_gradients.c)
ddpd_c_test(test_cnn_gradients ${CMAKE_CURRENT_LIST_DIR}/trainer/test_cnn_gradients.c)
ddpd_c_test(test_optim ${CMAKE_CURRENT_LIST_DIR}/trainer/test_optim.c)
ddpd_c_test(test_host_plan ${CMAKE_CURRENT_LIST_DIR}/trainer/test_host_plan.c NO_SANITIZE) # glibc malloc statistics
ddpd_c_test(test_sampler ${CMAKE_CURRENT_LIST_DIR}/trainer/test_sampler.c)
ddpd_c_test(test_lr_schedule ${CMAKE_CURRENT_LIST_DIR}/trainer/test_lr_schedule.c)
ddpd_c_test(test_event_sink ${CMAKE_CURRENT_LIST_DIR}/trainer/test_event_sink.c)
ddpd_c_test(test_log_cap ${CMAKE_CURRENT_LIST_DIR}/trainer/test_log_cap.c)
ddpd_c_test(test_data_open ${CMAKE_CURRENT_LIST_DIR}/trainer/test_data_open.c)
ddpd_c_test(test_idx_cache ${CMAKE_CURRENT_LIST_DIR}/trainer/test_idx_cache.c)

# Data files: the IDX loader (Fashion-MNIST) and safetensors checkpoints. Built straight
# from their sources rather than through ddpd_trainer, so these tests stand on their own.
ddpd_c_test(test_idx ${CMAKE_CURRENT_LIST_DIR}/trainer/test_idx.c ${PROJECT_SOURCE_DIR}/trainer/idx.c
            ${PROJECT_SOURCE_DIR}/trainer/data_open.c LIBS ZLIB::ZLIB PkgConfig::JANSSON m)
ddpd_c_test(test_safetensors ${CMAKE_CURRENT_LIST_DIR}/trainer/test_safetensors.c ${PROJECT_SOURCE_DIR}/trainer/ckpt_files/safetensors.c
            LIBS ZLIB::ZLIB PkgConfig::JANSSON m)
target_include_directories(test_idx PRIVATE ${PROJECT_SOURCE_DIR}/trainer)
target_include_directories(test_safetensors PRIVATE ${PROJECT_SOURCE_DIR}/trainer/ckpt_files)
