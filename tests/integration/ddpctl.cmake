# ddpctl against a real ddpd running the real trainer (tests/integration/ddpctl/test_ddpctl.py,
# Python standard library, sharing the server tests' harness). Each case is its own
# ctest test.
if(TARGET ddpctl AND TARGET ddpd AND TARGET ddp-trainer)
  ddpd_py_cases(ddpctl_ ${CMAKE_CURRENT_LIST_DIR}/ddpctl/test_ddpctl.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --trainer $<TARGET_FILE:ddp-trainer> --ddpctl $<TARGET_FILE:ddpctl>)
endif()
