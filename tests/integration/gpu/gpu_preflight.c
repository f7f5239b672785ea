/* gpu_preflight: what the GPU bundle's pre-flight (scripts/gpu-bundle-run.sh) asks
 * CUDA, cuBLAS and NCCL themselves, with the very libraries the trainer will load:
 * their versions (no GPU needed) and the GPUs CUDA can use. One JSON object on
 * stdout:
 *   {"versions": "...", "driver": "580.65.06", "driver_cuda": 13000, "runtime": 13000,
 *    "cublas": "13.0.2", "nccl": "2.28.9", "gpus": [{"name", "memory_bytes", "pci"}],
 *    "no_gpu": "why" (only when CUDA can use none)}
 * Exit 0 (a host without a GPU is an answer, not a failure). CUDA builds only. */
#include <cuda_runtime_api.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/cuda_check.h"
#include "cuda/gpu_versions.h"

int main(void) {
    gpu_versions v;
    char line[256], text[64];
    gpu_versions_get(&v);
    gpu_versions_describe(&v, line, sizeof line);
    json_t *out = json_pack("{s:s, s:s, s:i, s:i}", "versions", line, "driver", v.driver, "driver_cuda", v.driver_cuda,
                            "runtime", v.runtime);
    snprintf(text, sizeof text, "%d.%d.%d", v.cublas[0], v.cublas[1], v.cublas[2]);
    json_object_set_new(out, "cublas", json_string(text));
    snprintf(text, sizeof text, "%d.%d.%d", v.nccl / 10000, v.nccl % 10000 / 100, v.nccl % 100);
    json_object_set_new(out, "nccl", json_string(text));

    json_t *gpus = json_array();
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        char what[512];
        gpu_cuda_error_text(e, what, sizeof what);
        json_object_set_new(out, "no_gpu", json_sprintf("cudaGetDeviceCount: %s", what));
        count = 0;
    } else if (count == 0) {
        json_object_set_new(out, "no_gpu", json_string("cudaGetDeviceCount: 0 devices"));
    }
    for (int d = 0; d < count; d++) {
        struct cudaDeviceProp prop;
        char pci[64] = "";
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
        cudaDeviceGetPCIBusId(pci, sizeof pci, d);
        json_array_append_new(gpus, json_pack("{s:s, s:I, s:s, s:i, s:i}", "name", prop.name, "memory_bytes",
                                              (json_int_t)prop.totalGlobalMem, "pci", pci, "major", prop.major,
                                              "minor", prop.minor));
    }
    json_object_set_new(out, "gpus", gpus);
    char *s = json_dumps(out, JSON_COMPACT);
    printf("%s\n", s);
    free(s);
    json_decref(out);
    return 0;
}
