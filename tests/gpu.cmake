# The GPU backend's tests. Everything that needs no GPU (the memory plan, GPU
# discovery and the device-to-rank mapping, backend selection, and ddp-trainer
# refusing `backend: nccl` where no GPU is visible) runs everywhere. The tests that
# need a GPU (each kernel against its CPU reference, the cuda engine against the
# cpu engine, whole runs) print "SKIPPED: no CUDA device (...)" and exit 77 on a
# host without one, which ctest shows as skipped; scripts/gpu-check.sh runs them
# on a GPU. Every name contains "gpu": `ctest -R gpu` runs them all.
ddpd_c_test(test_gpu_memory_plan ${CMAKE_CURRENT_LIST_DIR}/test_gpu_memory_plan.c)
ddpd_c_test(test_gpu_devices ${CMAKE_CURRENT_LIST_DIR}/test_gpu_devices.c)
ddpd_c_test(test_gpu_backend_select ${CMAKE_CURRENT_LIST_DIR}/test_gpu_backend_select.c)
ddpd_c_test(test_gpu_kernels ${CMAKE_CURRENT_LIST_DIR}/test_gpu_kernels.c)
ddpd_c_test(test_gpu_engine ${CMAKE_CURRENT_LIST_DIR}/test_gpu_engine.c)
if(DDPD_HAVE_CUDA) # the GPU build of the trainer: its backend selection and its engine
  foreach(t backend_select kernels engine)
    set_property(TARGET test_gpu_${t} PROPERTY LINK_LIBRARIES ddpd_trainer_nccl)
  endforeach()
endif()
set_tests_properties(test_gpu_kernels test_gpu_engine PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

ddpd_py_cases(gpu_e2e_ ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_e2e.py ARGS --trainer $<TARGET_FILE:ddp-trainer>
              SKIP_RETURN_CODE 77)

# The GPU backend's host code (cuda engine, model_cuda's cuBLAS calls, optim_cuda,
# coll_nccl) run on a CPU stand-in for CUDA, cuBLAS, NCCL and the kernels
# (gpu/fake_cuda.c): the same two test programs, so they run, and check the host
# side against the CPU engine, on machines without a GPU too (CUDA builds only:
# they compile against the toolkit's headers).
if(DDPD_HAVE_CUDA)
  foreach(t kernels engine)
    ddpd_c_test(test_gpu_${t}_fake_cuda ${CMAKE_CURRENT_LIST_DIR}/test_gpu_${t}.c ${CMAKE_CURRENT_LIST_DIR}/gpu/fake_cuda.c
                LIBS ddpd_trainer_nccl TIMEOUT 300)
  endforeach()

  # The GPU's optimizer update (optim_cuda.c, optim_kernels.cu's bodies) against
  # torch.optim, on the stand-in here; optim_replay_nccl is the same on a real GPU
  # (the GPU bundle runs it).
  foreach(v fake_cuda nccl)
    add_executable(optim_replay_${v} ${CMAKE_CURRENT_LIST_DIR}/trainer/optim_replay.c
                   $<$<STREQUAL:${v},fake_cuda>:${CMAKE_CURRENT_LIST_DIR}/gpu/fake_cuda.c>)
    target_link_libraries(optim_replay_${v} PRIVATE ddpd_trainer_nccl)
  endforeach()
  ddpd_py_cases(gpu_optim_torch_fake_cuda_ ${CMAKE_CURRENT_LIST_DIR}/trainer/test_optim_torch.py PYTHON /usr/bin/python3
                ARGS --replay $<TARGET_FILE:optim_replay_fake_cuda> --gpu SKIP_RETURN_CODE 77 TIMEOUT 120)

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
  add_executable(ddp-trainer-fake-cuda ${PROJECT_SOURCE_DIR}/trainer/main.c ${CMAKE_CURRENT_LIST_DIR}/gpu/fake_cuda.c
                                       ${CMAKE_CURRENT_LIST_DIR}/gpu/fake_gpu_present.c)
  target_link_libraries(ddp-trainer-fake-cuda PRIVATE ddpd_trainer_nccl -Wl,--wrap=gpu_present_scan_host)
  # (the two cases about hosts without a GPU are not for it)
  ddpd_py_cases(gpu_e2e_fake_cuda_ ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_e2e.py
                ARGS --trainer $<TARGET_FILE:ddp-trainer-fake-cuda> --fake-gpu EXCLUDE nccl_refused auto_picks_cpu)

  # The hand-over: the lean ddp-trainer, seeing (fake) GPUs, execs ddp-trainer-nccl
  # (here the stand-in build, named by DDPD_TRAINER_NCCL) with the same command line.
  add_executable(ddp-trainer-lean-fake-gpu ${PROJECT_SOURCE_DIR}/trainer/main.c
                                           ${CMAKE_CURRENT_LIST_DIR}/gpu/fake_gpu_present.c)
  target_link_libraries(ddp-trainer-lean-fake-gpu PRIVATE ddpd_trainer -Wl,--wrap=gpu_present_scan_host)
  add_test(NAME gpu_e2e_handoff_to_nccl_build
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_e2e.py two_ranks
                   --trainer $<TARGET_FILE:ddp-trainer-lean-fake-gpu> --fake-gpu)
  set_tests_properties(gpu_e2e_handoff_to_nccl_build PROPERTIES TIMEOUT 300
                       ENVIRONMENT "DDPD_TRAINER_NCCL=$<TARGET_FILE:ddp-trainer-fake-cuda>")
endif()
