# Tests of schema/: the generic validator, the run config (its schema, the rules
# between fields, the struct), and MASTER_PORT's range and free ports (ports.c).
# They link ddpd_schema alone, so that they build and run whatever state the
# trainer is in.
ddpd_c_test(test_validator ${CMAKE_CURRENT_LIST_DIR}/schema/test_validator.c LIBS ddpd_schema Threads::Threads)
ddpd_c_test(test_run_config ${CMAKE_CURRENT_LIST_DIR}/schema/test_run_config.c LIBS ddpd_schema Threads::Threads)
ddpd_c_test(test_ports ${CMAKE_CURRENT_LIST_DIR}/schema/test_ports.c LIBS ddpd_schema)
