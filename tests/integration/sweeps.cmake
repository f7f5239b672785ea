# Sweeps (POST /sweeps, ddpctl sweep) against a real ddpd running the real trainer on
# Fashion-MNIST subsets, and ddp-run for a command-run sweep (tests/integration/sweeps/).
if(TARGET ddpd AND TARGET ddp-trainer AND TARGET ddp-run AND TARGET ddpctl)
  ddpd_py_cases(sweep_ ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweeps.py SANITIZE
                ARGS --ddpd $<TARGET_FILE:ddpd> --trainer ${DDPD_SERVER_TESTS_TRAINER}
                     --fake-trainer ${DDPD_TEST_SUPPORT}/fake_trainer.py
                     --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                TIMEOUT 600)
endif()
# A sweep through every gate a run passes, attacked between two members (real Unix accounts
# made by the test, the server as root: skipped with a message else).
if(TARGET ddpd AND TARGET ddp-trainer AND TARGET ddp-run)
  ddpd_py_cases(sweep_gates_ ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_gates.py SANITIZE
                ARGS --ddpd $<TARGET_FILE:ddpd> --trainer ${DDPD_SERVER_TESTS_TRAINER}
                     --fake-trainer ${DDPD_TEST_SUPPORT}/fake_trainer.py
                     --runner $<TARGET_FILE:ddp-run>
                TIMEOUT 420 SKIP_RETURN_CODE 77)
endif()
# Sweeps that grow, pause and learn (issue 50): any per-epoch metric a script reports,
# pause and resume, more trials and trials by hand, TPE, ASHA's max_resource.
if(TARGET ddpd AND TARGET ddp-trainer AND TARGET ddp-run AND TARGET ddpctl)
  ddpd_py_cases(sweep_grow_ ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweeps_grow.py SANITIZE
                ARGS --ddpd $<TARGET_FILE:ddpd> --trainer ${DDPD_SERVER_TESTS_TRAINER}
                     --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                TIMEOUT 600)
endif()
# The warm start of a sweep's Python trials (issue 50): the same results as a cold start,
# the wall between two accounts' zygotes, cancel (real Unix accounts: root, else skipped).
if(TARGET ddpd AND TARGET ddp-run AND TARGET ddpctl)
  ddpd_py_cases(sweep_warm_ ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_warm.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
# Command trials paused, not killed (issue 50): ASHA's pause with the notice and its
# promotion from the script's snapshot, a sweep's pause, a notice ignored, another
# member's reach (real Unix accounts made by the test, the server as root).
if(TARGET ddpd AND TARGET ddp-run)
  ddpd_py_cases(sweep_pause_ ${CMAKE_CURRENT_LIST_DIR}/sweeps/test_sweep_pause.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --runner $<TARGET_FILE:ddp-run>
                TIMEOUT 900 SKIP_RETURN_CODE 77)
endif()
