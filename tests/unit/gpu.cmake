# The GPU backend's C unit tests. Those that need no GPU (the memory plan, GPU discovery
# and the device-to-rank mapping, backend selection) run everywhere. Those that need one
# (each kernel against its CPU reference, the cuda engine against the cpu engine) print
# "SKIPPED: no CUDA device (...)" and exit 77 on a host without one, which ctest shows as
# skipped; the GPU bundle runs them on a GPU. Every name contains "gpu": `ctest -R gpu`
# runs them all, with integration/gpu.cmake's.
ddpd_c_test(test_gpu_memory_plan ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_memory_plan.c)
ddpd_c_test(test_gpu_devices ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_devices.c)
ddpd_c_test(test_gpu_backend_select ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_backend_select.c)
ddpd_c_test(test_gpu_kernels ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_kernels.c)
ddpd_c_test(test_gpu_engine ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_engine.c)
if(DDPD_HAVE_CUDA) # the GPU build of the trainer: its backend selection and its engine
  foreach(t backend_select kernels engine)
    set_property(TARGET test_gpu_${t} PROPERTY LINK_LIBRARIES ddpd_trainer_nccl)
  endforeach()
endif()
set_tests_properties(test_gpu_kernels test_gpu_engine PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# The GPU backend's host code (cuda engine, model_cuda's cuBLAS calls, optim_cuda,
# coll_nccl) run on a CPU stand-in for CUDA, cuBLAS, NCCL and the kernels
# (support/fake_cuda.c): the same two test programs, so they run, and check the host
# side against the CPU engine, on machines without a GPU too (CUDA builds only:
# they compile against the toolkit's headers).
if(DDPD_HAVE_CUDA)
  foreach(t kernels engine)
    ddpd_c_test(test_gpu_${t}_fake_cuda ${CMAKE_CURRENT_LIST_DIR}/gpu/test_gpu_${t}.c ${DDPD_TEST_SUPPORT}/fake_cuda.c
                LIBS ddpd_trainer_nccl TIMEOUT 300)
  endforeach()
endif()
