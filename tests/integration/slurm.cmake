# ddpd on a real Slurm cluster (ddpd serve --executor slurm): a slurmctld and two slurmd
# on this host, which the fixture slurm_cluster_up starts before the slurm_ cases and
# slurm_cluster_down stops after them (every daemon and what its jobs left). Root and
# Debian's slurm-wlm and munge (scripts/install-deps.sh) are needed; without them every
# test is skipped, saying why.
if(NOT (TARGET ddpd AND TARGET ddp-run AND TARGET ddp-trainer AND TARGET ddpctl))
  return()
endif()
set(SLURM_CLUSTER_DIR ${CMAKE_BINARY_DIR}/slurm-cluster)
add_test(NAME slurm_cluster_up
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/slurm/slurm_cluster.py up --dir ${SLURM_CLUSTER_DIR})
add_test(NAME slurm_cluster_down
         COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/slurm/slurm_cluster.py down --dir ${SLURM_CLUSTER_DIR})
set_tests_properties(slurm_cluster_up PROPERTIES FIXTURES_SETUP slurm_cluster TIMEOUT 120 SKIP_RETURN_CODE 77
                                                 RESOURCE_LOCK slurm_cluster)
set_tests_properties(slurm_cluster_down PROPERTIES FIXTURES_CLEANUP slurm_cluster TIMEOUT 120
                                                   RESOURCE_LOCK slurm_cluster)
ddpd_py_cases(slurm_ ${CMAKE_CURRENT_LIST_DIR}/slurm/test_slurm.py
              ARGS --ddpd $<TARGET_FILE:ddpd> --trainer $<TARGET_FILE:ddp-trainer> --runner $<TARGET_FILE:ddp-run> --ddpctl $<TARGET_FILE:ddpctl>
                   --cluster-dir ${SLURM_CLUSTER_DIR} --openapi ${PROJECT_SOURCE_DIR}/schema/openapi.json
              TIMEOUT 400 SKIP_RETURN_CODE 77)
get_property(slurm_cases DIRECTORY PROPERTY TESTS)
list(FILTER slurm_cases INCLUDE REGEX "^slurm_")
list(REMOVE_ITEM slurm_cases slurm_cluster_up slurm_cluster_down)
# the cases share the cluster's two nodes, one at a time (a case waits on its job's CPUs)
set_tests_properties(${slurm_cases} PROPERTIES FIXTURES_REQUIRED slurm_cluster RESOURCE_LOCK slurm_cluster)
