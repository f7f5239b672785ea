# Tests of base/ (ddpd_common, below every program): the failure classifier over
# recorded outputs (base/failure_outputs/, made by its record.py), and the restart
# policy that acts on the classes (restart_policy.c).
ddpd_c_test(test_failure_class ${CMAKE_CURRENT_LIST_DIR}/base/test_failure_class.c LIBS ddpd_common)
ddpd_c_test(test_restart_policy ${CMAKE_CURRENT_LIST_DIR}/base/test_restart_policy.c LIBS ddpd_common)
