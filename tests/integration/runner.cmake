# ddp-run, the launcher of command runs, run directly (no server) on real processes,
# and with Debian's python3-torch (gloo) for a real DDP script; the ranks run
# /usr/bin/python3, as users' scripts do.
ddpd_py_cases(ddp_run_ ${CMAKE_CURRENT_LIST_DIR}/runner/test_ddp_run.py PYTHON /usr/bin/python3
              ARGS --ddp-run $<TARGET_FILE:ddp-run> --cmake ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR}
              TIMEOUT 300)
# Its restarts (distributed.max_restarts): a multigpu_torchrun.py-shaped script on
# Debian's torch and gloo, crashing once; restarts that run out; cancels; ports.
ddpd_py_cases(ddp_run_restarts_ ${CMAKE_CURRENT_LIST_DIR}/runner/test_ddp_run_restarts.py PYTHON /usr/bin/python3
              ARGS --ddp-run $<TARGET_FILE:ddp-run> TIMEOUT 300)
