# bench_allreduce: the cpu all-reduce against a memcpy of the same buffer (run by
# bench/allreduce.sh). Built from the collectives' sources directly, like its test.
add_executable(bench_allreduce
  ${CMAKE_CURRENT_SOURCE_DIR}/bench_allreduce.c
  ${PROJECT_SOURCE_DIR}/trainer/coll_cpu.c
  ${PROJECT_SOURCE_DIR}/trainer/futex_barrier.c)
target_include_directories(bench_allreduce PRIVATE ${PROJECT_SOURCE_DIR}/trainer)
target_link_libraries(bench_allreduce PRIVATE ddpd_common Threads::Threads ${MATH_LIBRARY})

# bench_gloo_allreduce: the built-in trainer's link between nodes (gloo's ring over
# TCP), one process per node (run by bench/cross_node.py).
if(DDPD_HAVE_GLOO)
  add_executable(bench_gloo_allreduce ${CMAKE_CURRENT_SOURCE_DIR}/bench_gloo_allreduce.c)
  target_link_libraries(bench_gloo_allreduce PRIVATE ddpd_nodes)
endif()
