# Sweeps' pure parts, in C with no server: the spec's parsing and expansion on hand-made
# bodies, and the searcher's rules (median stopping, ASHA's rungs and promotions, the best
# trial) on hand-made tables (no database, no clock).
ddpd_c_test(test_sweep_spec ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_spec.c LIBS ddpd_sweep)
ddpd_c_test(test_sweep_rules ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_rules.c LIBS ddpd_sweep)
ddpd_c_test(test_sweep_tpe ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_tpe.c LIBS ddpd_sweep)
# The searcher's look for sweeps reopened by a hand resume, on a real SQLite file: its
# answers, and its plan held to the live sweep runs' index (no walk of every queued run).
ddpd_c_test(test_sweep_revived ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_revived.c LIBS ddpd_sweep)
