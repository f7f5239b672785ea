# Command runs: the user's own program run once per rank (ddp-run) behind a real
# ddpd. Refusals need only the server; the runs themselves run Debian's
# python3-torch (gloo, CPU) with /usr/bin/python3, as users' scripts do.
ddpd_py_cases(command_refusals_ ${CMAKE_CURRENT_LIST_DIR}/commands/test_command_refusals.py
              ARGS --ddpd $<TARGET_FILE:ddpd> TIMEOUT 120)
if(TARGET ddp-run AND TARGET ddpctl)
  ddpd_py_cases(command_runs_ ${CMAKE_CURRENT_LIST_DIR}/commands/test_command_runs.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                TIMEOUT 400)
  ddpd_py_cases(command_preemption_ ${CMAKE_CURRENT_LIST_DIR}/commands/test_command_preemption.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                     --notice-c $<TARGET_FILE:notice_c_demo>
                TIMEOUT 400 SKIP_RETURN_CODE 77)
  ddpd_py_cases(command_elastic_ ${CMAKE_CURRENT_LIST_DIR}/commands/test_command_elastic.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                TIMEOUT 400)
  ddpd_py_cases(command_attempts_ ${CMAKE_CURRENT_LIST_DIR}/commands/test_command_attempts.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                TIMEOUT 400)
endif()
