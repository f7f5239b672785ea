# The cpu collectives' tests. Built straight from the collectives' own sources rather
# than from ddpd_trainer, so they build and run while the rest of the trainer is in
# flux; the code under test is the very file the trainer links.
ddpd_c_test(test_collectives ${CMAKE_CURRENT_LIST_DIR}/collectives/test_collectives.c ${PROJECT_SOURCE_DIR}/trainer/coll_cpu.c
            ${PROJECT_SOURCE_DIR}/trainer/futex_barrier.c LIBS ddpd_common Threads::Threads ${MATH_LIBRARY} TIMEOUT 400)
target_include_directories(test_collectives PRIVATE ${PROJECT_SOURCE_DIR}/trainer)

# The cpu collectives across nodes: two "nodes" of shared memory, linked by gloo over
# loopback (where the build has gloo).
if(DDPD_HAVE_GLOO)
  ddpd_c_test(test_coll_nodes ${CMAKE_CURRENT_LIST_DIR}/collectives/test_coll_nodes.c ${PROJECT_SOURCE_DIR}/trainer/coll_cpu.c
              ${PROJECT_SOURCE_DIR}/trainer/futex_barrier.c LIBS ddpd_common ddpd_nodes Threads::Threads ${MATH_LIBRARY} TIMEOUT 120)
endif()
