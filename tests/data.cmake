# Data files: the IDX loader (Fashion-MNIST) and safetensors checkpoints. Built straight
# from their sources rather than through ddpd_trainer, so these tests stand on their own.
foreach(area idx safetensors)
  add_executable(test_${area} test_${area}.c ${PROJECT_SOURCE_DIR}/trainer/${area}.c)
  target_include_directories(test_${area} PRIVATE ${PROJECT_SOURCE_DIR}/trainer ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(test_${area} PRIVATE ZLIB::ZLIB PkgConfig::JANSSON m)
  add_test(NAME test_${area} COMMAND test_${area})
endforeach()
target_sources(test_idx PRIVATE ${PROJECT_SOURCE_DIR}/trainer/data_open.c)
