# Operations' pure logic (the log's lines, metrics' text, auth's rules): C, no server.
if(NOT TARGET ddpd)
  return()
endif()
ddpd_c_test(test_ops_units ${CMAKE_CURRENT_LIST_DIR}/ops/test_ops_units.c LIBS ddpd_api)
