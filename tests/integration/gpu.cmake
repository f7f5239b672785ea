# The GPU backend end to end (its C unit tests are unit/gpu.cmake's): ddp-trainer
# refusing `backend: nccl` where no GPU is visible runs everywhere; whole runs on a GPU
# print "SKIPPED: no CUDA device (...)" and exit 77 on a host without one. On the CPU
# stand-in for CUDA, cuBLAS and NCCL (support/fake_cuda.c, CUDA builds only): the GPU
# bundle's pre-flight, ddp-trainer on two fake
# GPUs, and the lean trainer's hand-over to the nccl build.
ddpd_py_cases(gpu_e2e_ ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_e2e.py ARGS --trainer $<TARGET_FILE:ddp-trainer>
              SKIP_RETURN_CODE 77)

if(DDPD_HAVE_CUDA)
  # The GPU bundle (scripts/gpu-bundle.sh): its pre-flight's view of CUDA, cuBLAS and
  # NCCL (gpu_preflight), and the bundle made from this build, run under env -i with
  # nothing but its own libraries: it gets through the pre-flight's library checks
  # and says there is no GPU (on a host without one).
  add_executable(gpu_preflight ${CMAKE_CURRENT_LIST_DIR}/gpu/gpu_preflight.c)
  target_link_libraries(gpu_preflight PRIVATE ddpd_trainer_nccl)
  ddpd_py_cases(gpu_bundle_ ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_bundle.py
                ARGS --build ${CMAKE_BINARY_DIR} --source ${PROJECT_SOURCE_DIR} TIMEOUT 600)

  # ddp-trainer itself on the stand-in (two fake GPUs): the launcher's and the
  # rank's nccl hooks, the watchdog thread, events, checkpoints and resume.
  add_executable(ddp-trainer-fake-cuda ${PROJECT_SOURCE_DIR}/trainer/main.c ${DDPD_TEST_SUPPORT}/fake_cuda.c
                                       ${DDPD_TEST_SUPPORT}/fake_gpu_present.c)
  target_link_libraries(ddp-trainer-fake-cuda PRIVATE ddpd_trainer_nccl -Wl,--wrap=gpu_present_scan_host)
  # (the two cases about hosts without a GPU are not for it)
  ddpd_py_cases(gpu_e2e_fake_cuda_ ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_e2e.py
                ARGS --trainer $<TARGET_FILE:ddp-trainer-fake-cuda> --fake-gpu EXCLUDE nccl_refused auto_picks_cpu)

  # The hand-over: the lean ddp-trainer, seeing (fake) GPUs, execs ddp-trainer-nccl
  # (here the stand-in build, named by DDPD_TRAINER_NCCL) with the same command line.
  add_executable(ddp-trainer-lean-fake-gpu ${PROJECT_SOURCE_DIR}/trainer/main.c
                                           ${DDPD_TEST_SUPPORT}/fake_gpu_present.c)
  target_link_libraries(ddp-trainer-lean-fake-gpu PRIVATE ddpd_trainer -Wl,--wrap=gpu_present_scan_host)
  add_test(NAME gpu_e2e_handoff_to_nccl_build
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_e2e.py two_ranks
                   --trainer $<TARGET_FILE:ddp-trainer-lean-fake-gpu> --fake-gpu)
  set_tests_properties(gpu_e2e_handoff_to_nccl_build PROPERTIES TIMEOUT 300
                       ENVIRONMENT "DDPD_TRAINER_NCCL=$<TARGET_FILE:ddp-trainer-fake-cuda>")
endif()
