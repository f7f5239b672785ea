# Runs across nodes: a coordinator and a `ddpd agent` in two network namespaces the
# test makes (root only; skipped with a message where they cannot be made).
if(TARGET ddp-run AND TARGET ddp-trainer)
  ddpd_py_cases(nodes_ ${CMAKE_CURRENT_LIST_DIR}/nodes/test_nodes.py
                ARGS --ddpd $<TARGET_FILE:ddpd> --ddpctl $<TARGET_FILE:ddpctl> --runner $<TARGET_FILE:ddp-run> --trainer $<TARGET_FILE:ddp-trainer>
                TIMEOUT 300 SKIP_RETURN_CODE 77)
  # six runs and eight attempts of torch ranks (two to mark a slot): past 300 s on a busy box
  set_tests_properties(nodes_suspect_nodes PROPERTIES TIMEOUT 600)
endif()
