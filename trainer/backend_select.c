/* Backend selection: see backend_select.h. This build has the cpu backend only;
 * the nccl backend slots in here. */
#include "backend_select.h"

#include <stdio.h>

int backend_select(const run_config *cfg, char *why, size_t whylen) {
    switch (cfg->distributed.backend) {
    case BACKEND_CPU:
        snprintf(why, whylen, "backend cpu, as the config asks");
        return BACKEND_CPU;
    case BACKEND_AUTO:
        snprintf(why, whylen, "backend auto picked cpu: this ddp-trainer was built without the GPU (nccl) backend");
        return BACKEND_CPU;
    case BACKEND_NCCL:
        snprintf(why, whylen,
                 "backend nccl is not available: this ddp-trainer was built without the GPU (nccl) backend; "
                 "set distributed.backend to \"cpu\" or \"auto\"");
        return -1;
    }
    snprintf(why, whylen, "unknown backend");
    return -1;
}
