# Tests of schema/: the generic validator, and the run config (its schema, the rules
# between fields, the struct). They link ddpd_schema alone, so that they build and run
# whatever state the trainer is in.
foreach(schema_test test_validator test_run_config)
  add_executable(${schema_test} ${CMAKE_CURRENT_SOURCE_DIR}/${schema_test}.c)
  target_link_libraries(${schema_test} PRIVATE ddpd_schema Threads::Threads)
  target_include_directories(${schema_test} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  add_test(NAME ${schema_test} COMMAND ${schema_test})
endforeach()
