# Runs across nodes: a coordinator and a `ddpd agent` in two network namespaces the
# test makes (root only; skipped with a message where they cannot be made).
if(TARGET ddp-run AND TARGET ddp-trainer)
  ddpd_py_cases(nodes_ ${CMAKE_CURRENT_LIST_DIR}/nodes/test_nodes.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --ddpctl $<TARGET_FILE:ddpctl> --runner $<TARGET_FILE:ddp-run> --trainer $<TARGET_FILE:ddp-trainer>
                TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
