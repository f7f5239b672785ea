# The trainer against real things: its optimizers and schedules against PyTorch's, and
# end-to-end tests that run the real ddp-trainer binary on Fashion-MNIST (its C unit
# tests are unit/trainer.cmake's).

# The optimizers and schedules against torch.optim and torch.optim.lr_scheduler
# themselves (Debian's python3-torch): optim_replay runs the trainer's code over the
# parameters and gradients the test gives it.
add_executable(optim_replay ${CMAKE_CURRENT_LIST_DIR}/trainer/optim_replay.c)
target_link_libraries(optim_replay PRIVATE ddpd_trainer)
ddpd_py_cases(optim_torch_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_optim_torch.py PYTHON /usr/bin/python3
              ARGS --replay $<TARGET_FILE:optim_replay> SKIP_RETURN_CODE 77 TIMEOUT 120)

if(DDPD_HAVE_CUDA)
  # The GPU's optimizer update (optim_cuda.c, optim_kernels.cu's bodies) against
  # torch.optim, on the stand-in here; optim_replay_nccl is the same on a real GPU
  # (the GPU bundle runs it).
  foreach(v fake_cuda nccl)
    add_executable(optim_replay_${v} ${CMAKE_CURRENT_LIST_DIR}/trainer/optim_replay.c
                   $<$<STREQUAL:${v},fake_cuda>:${DDPD_TEST_SUPPORT}/fake_cuda.c>)
    target_link_libraries(optim_replay_${v} PRIVATE ddpd_trainer_nccl)
  endforeach()
  ddpd_py_cases(gpu_optim_torch_fake_cuda_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_optim_torch.py PYTHON /usr/bin/python3
                ARGS --replay $<TARGET_FILE:optim_replay_fake_cuda> --gpu SKIP_RETURN_CODE 77 TIMEOUT 120)
endif()

# The end-to-end tests share one dataset cache in the build tree (not the user's).
# Two cases run in the normal build only, their sanitized runs (the longest of that
# pass) repeating C code other sanitized cases of the file run: preempted_mid_epoch's
# SIGUSR1, mid-epoch checkpoint and resume from it are resume_other_ranks' (which
# resumes such a checkpoint on other ranks too); heartbeats' heartbeat() runs in every
# run of a second or more and at every run's end.
ddpd_py_cases(trainer_e2e_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_trainer_e2e.py SANITIZE
              NOT_SANITIZED preempted_mid_epoch heartbeats
              ARGS --trainer $<TARGET_FILE:ddp-trainer> ENVIRONMENT DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache)
# Its restarts (distributed.max_restarts): a rank killed once, the run bit-identical.
ddpd_py_cases(trainer_restarts_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_trainer_restarts.py SANITIZE
              ARGS --trainer $<TARGET_FILE:ddp-trainer> ENVIRONMENT DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache)
# The CNN (model.type "cnn"), end to end: a small network on ~1000 examples, seconds a case.
ddpd_py_cases(trainer_cnn_e2e_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_cnn_e2e.py SANITIZE
              ARGS --trainer $<TARGET_FILE:ddp-trainer>
              ENVIRONMENT DDPD_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache DDPD_BUILT_WITH_ONEDNN=${DDPD_HAVE_ONEDNN})

