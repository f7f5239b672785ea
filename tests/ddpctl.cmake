# ddpctl against a real ddpd running the real trainer (tests/ddpctl/test_ddpctl.py,
# Python standard library, sharing the server tests' harness). Each case is its own
# ctest test.
find_package(Python3 REQUIRED COMPONENTS Interpreter)
if(TARGET ddpctl AND TARGET ddpd AND TARGET ddp-trainer)
  foreach(case submit_follow list_show cancel metrics_csv errors logs)
    add_test(NAME ddpctl_${case}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/ddpctl/test_ddpctl.py ${case}
                     --ddpd $<TARGET_FILE:ddpd> --trainer $<TARGET_FILE:ddp-trainer> --ddpctl $<TARGET_FILE:ddpctl>)
    set_tests_properties(ddpctl_${case} PROPERTIES TIMEOUT 300)
  endforeach()
endif()
