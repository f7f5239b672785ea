# The GPU benchmark (scripts/gpu-check.sh runs it): the cuda engine's step at a few
# batch sizes beside the GPU's measured SGEMM peak. Built in every build; without
# CUDA it only says it skipped.
add_executable(bench_gpu_step ${CMAKE_CURRENT_LIST_DIR}/gpu/bench_gpu_step.c)
target_link_libraries(bench_gpu_step PRIVATE $<IF:$<TARGET_EXISTS:ddpd_trainer_nccl>,ddpd_trainer_nccl,ddpd_trainer>)
