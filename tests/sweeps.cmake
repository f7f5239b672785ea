# Sweeps (POST /sweeps, ddpctl sweep) against a real ddpd running the real trainer on
# Fashion-MNIST subsets, and ddp-run for a command-run sweep (tests/sweeps/).
if(TARGET ddpd AND TARGET ddp-trainer AND TARGET ddp-run AND TARGET ddpctl)
  ddpd_py_cases(sweep_ ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweeps.py SANITIZE
                ARGS --ddpd $<TARGET_FILE:ddpd> --trainer $<TARGET_FILE:ddp-trainer>
                     --fake-trainer ${CMAKE_CURRENT_LIST_DIR}/server/fake_trainer.py
                     --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                TIMEOUT 600)
endif()
# A sweep through every gate a run passes, attacked between two members (real Unix accounts
# made by the test, the server as root: skipped with a message else).
if(TARGET ddpd AND TARGET ddp-trainer AND TARGET ddp-run)
  ddpd_py_cases(sweep_gates_ ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_gates.py SANITIZE
                ARGS --ddpd $<TARGET_FILE:ddpd> --trainer $<TARGET_FILE:ddp-trainer>
                     --fake-trainer ${CMAKE_CURRENT_LIST_DIR}/server/fake_trainer.py
                     --runner $<TARGET_FILE:ddp-run>
                TIMEOUT 420 SKIP_RETURN_CODE 77)
endif()
# The spec's parsing and expansion on hand-made bodies (C, no server).
ddpd_c_test(test_sweep_spec ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_spec.c LIBS ddpd_sweep)
# The searcher's rules (median stopping, ASHA's rungs and promotions, the best trial) on
# hand-made tables (C, no database, no clock).
ddpd_c_test(test_sweep_rules ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_rules.c LIBS ddpd_sweep)
