# The test support itself: a test that made no check fails, in C (support/check.h)
# and in Python (support/checks.py), and Python cases are found by --list-cases.
ddpd_c_test(test_check_harness ${CMAKE_CURRENT_LIST_DIR}/support/test_check_harness.c LIBS m)
ddpd_py_cases(checks_ ${CMAKE_CURRENT_LIST_DIR}/support/test_checks.py TIMEOUT 60)
