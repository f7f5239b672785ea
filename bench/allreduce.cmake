# bench_allreduce: the cpu all-reduce against a memcpy of the same buffer (run by
# bench/allreduce.sh). Built from the collectives' sources directly, like its test.
add_executable(bench_allreduce
  ${CMAKE_CURRENT_SOURCE_DIR}/bench_allreduce.c
  ${PROJECT_SOURCE_DIR}/trainer/coll_cpu.c
  ${PROJECT_SOURCE_DIR}/trainer/futex_barrier.c)
target_include_directories(bench_allreduce PRIVATE ${PROJECT_SOURCE_DIR}/trainer)
target_link_libraries(bench_allreduce PRIVATE Threads::Threads ${MATH_LIBRARY})
