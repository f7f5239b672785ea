# Data files: the IDX loader (Fashion-MNIST) and safetensors checkpoints. Built straight
# from their sources rather than through ddpd_trainer, so these tests stand on their own.
ddpd_c_test(test_idx ${CMAKE_CURRENT_LIST_DIR}/test_idx.c ${PROJECT_SOURCE_DIR}/trainer/idx.c
            ${PROJECT_SOURCE_DIR}/trainer/data_open.c LIBS ZLIB::ZLIB PkgConfig::JANSSON m)
ddpd_c_test(test_safetensors ${CMAKE_CURRENT_LIST_DIR}/test_safetensors.c ${PROJECT_SOURCE_DIR}/trainer/ckpt_files/safetensors.c
            LIBS ZLIB::ZLIB PkgConfig::JANSSON m)
target_include_directories(test_idx PRIVATE ${PROJECT_SOURCE_DIR}/trainer)
target_include_directories(test_safetensors PRIVATE ${PROJECT_SOURCE_DIR}/trainer/ckpt_files)
