# The cpu collectives' tests. Built straight from the collectives' own sources rather
# than from ddpd_trainer, so they build and run while the rest of the trainer is in
# flux; the code under test is the very file the trainer links.
add_executable(test_collectives
  ${CMAKE_CURRENT_SOURCE_DIR}/test_collectives.c
  ${PROJECT_SOURCE_DIR}/trainer/coll_cpu.c
  ${PROJECT_SOURCE_DIR}/trainer/futex_barrier.c)
target_include_directories(test_collectives PRIVATE ${PROJECT_SOURCE_DIR}/trainer ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(test_collectives PRIVATE Threads::Threads ${MATH_LIBRARY})
add_test(NAME test_collectives COMMAND test_collectives)
set_tests_properties(test_collectives PROPERTIES TIMEOUT 400)
