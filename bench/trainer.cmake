# The step's GEMMs alone: the ceiling the trainer's samples/s is held against.
add_executable(bench_step_gemms ${CMAKE_CURRENT_LIST_DIR}/bench_step_gemms.c)
target_include_directories(bench_step_gemms PRIVATE ${CBLAS_INCLUDE_DIR})
target_link_libraries(bench_step_gemms PRIVATE ${OPENBLAS_LIBRARY} ${MATH_LIBRARY})

# A rank's step alone (forward, backward, optimizer; no data, no collectives): the
# ceiling bench/cnn.sh holds ddp-trainer against.
add_executable(bench_step_compute ${CMAKE_CURRENT_LIST_DIR}/bench_step_compute.c)
target_link_libraries(bench_step_compute PRIVATE ddpd_trainer)

# One shared copy of the parameters against a copy per rank (mirrored), two ranks:
# why the cpu engine mirrors (docs/cpu-performance.md).
add_executable(bench_param_copies ${CMAKE_CURRENT_LIST_DIR}/bench_param_copies.c)
target_link_libraries(bench_param_copies PRIVATE ddpd_trainer)
