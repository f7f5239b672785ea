/* Backend selection: see backend_select.h. In builds without CUDA only cpu exists;
 * in CUDA builds the GPUs are counted from the driver's listing and
 * CUDA_VISIBLE_DEVICES, then confirmed by a short-lived child process that asks
 * CUDA itself (so the launcher never initialises CUDA before it forks). */
#include "backend_select.h"

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ddpd_build_config.h"
#include "cuda/gpu_devices.h"
#if DDPD_NCCL_BACKEND
#include "cuda/gpu_probe.h"
#endif

/* What to say about the visible GPUs. ddpd gives a run it placed on CPU slots an empty
 * CUDA_VISIBLE_DEVICES (with its run id in DDPD_RUN_ID): that is the placement, not
 * a setting to warn about. */
static const char *visible_note(const gpu_visible *v) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (cvd && !*cvd && getenv("DDPD_RUN_ID")) return "ddpd gave this run CPU slots";
    return v->note;
}

int backend_decide(backend_kind asked, int world_size, int gpus, const char *gpu_note, char *why, size_t whylen) {
    int enough = gpus >= world_size && gpus > 0;
    switch (asked) {
    case BACKEND_CPU:
        snprintf(why, whylen, "backend cpu, as the config asks");
        return BACKEND_CPU;
    case BACKEND_AUTO:
        if (enough)
            snprintf(why, whylen, "backend auto picked nccl: %d usable GPU%s cover%s the %d rank%s, one GPU each (%s)",
                     gpus, gpus > 1 ? "s" : "", gpus > 1 ? "" : "s", world_size, world_size > 1 ? "s" : "", gpu_note);
        else if (gpus == 0)
            snprintf(why, whylen, "backend auto picked cpu: no usable GPU (%s)", gpu_note);
        else
            snprintf(why, whylen,
                     "backend auto picked cpu: %d ranks need %d GPUs (one each: two ranks never share a GPU) "
                     "but %d %s usable (%s)",
                     world_size, world_size, gpus, gpus > 1 ? "are" : "is", gpu_note);
        return enough ? BACKEND_NCCL : BACKEND_CPU;
    case BACKEND_NCCL:
        if (enough) {
            snprintf(why, whylen, "backend nccl, as the config asks: %d rank%s on %d usable GPU%s (%s)", world_size,
                     world_size > 1 ? "s" : "", gpus, gpus > 1 ? "s" : "", gpu_note);
            return BACKEND_NCCL;
        }
        if (gpus == 0)
            snprintf(why, whylen,
                     "backend nccl needs a GPU per rank but this host has no usable GPU (%s): set "
                     "distributed.backend to \"cpu\" (or \"auto\", which falls back to cpu), or run on a host with "
                     "NVIDIA GPUs",
                     gpu_note);
        else
            snprintf(why, whylen,
                     "backend nccl needs one GPU per rank (NCCL cannot put two ranks on one GPU): world_size %d "
                     "but %d GPU%s usable (%s): lower distributed.world_size to %d, make more GPUs visible, or set "
                     "distributed.backend to \"cpu\"",
                     world_size, gpus, gpus > 1 ? "s are" : " is", gpu_note, gpus);
        return -1;
    }
    snprintf(why, whylen, "unknown backend");
    return -1;
}

#if DDPD_NCCL_BACKEND
int backend_select(const run_config *cfg, int ranks_here, char *why, size_t whylen) {
    backend_kind asked = cfg->distributed.backend;
    int world = ranks_here;
    if (asked == BACKEND_CPU) return backend_decide(asked, world, 0, "", why, whylen);
    gpu_present present;
    gpu_visible visible;
    gpu_present_scan_host(&present);
    gpu_visible_resolve(getenv("CUDA_VISIBLE_DEVICES"), &present, &visible);
    int gpus = visible.count;
    char note[640];
    snprintf(note, sizeof note, "%s", visible_note(&visible));
    if (gpus > 0) { /* the driver lists some: ask CUDA (in a child) how many it can use */
        int usable = 0;
        char probe_why[256];
        if (gpu_probe_usable(&usable, probe_why, sizeof probe_why) != 0) {
            snprintf(note, sizeof note, "%s; but CUDA cannot use them: %s", visible.note, probe_why);
            gpus = 0;
        } else if (usable != gpus) {
            snprintf(note, sizeof note, "%s; CUDA reports %d usable", visible.note, usable);
            gpus = usable;
        }
    }
    return backend_decide(asked, world, gpus, note, why, whylen);
}
int backend_handoff(const run_config *cfg, char *path, size_t pathlen) {
    (void)cfg, (void)path, (void)pathlen; /* this is the GPU build */
    return 0;
}
const char *backend_nccl_executable(char *path, size_t pathlen) {
    (void)path, (void)pathlen;
    return NULL;
}
#else
/* ddp-trainer-nccl beside this executable, or $DDPD_TRAINER_NCCL; NULL if absent. */
static const char *nccl_trainer(char *path, size_t pathlen) {
    const char *env = getenv("DDPD_TRAINER_NCCL");
    if (env && *env) {
        snprintf(path, pathlen, "%s", env);
    } else {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n <= 0) return NULL;
        self[n] = '\0';
        if (snprintf(path, pathlen, "%s/ddp-trainer-nccl", dirname(self)) >= (int)pathlen) return NULL;
    }
    return access(path, X_OK) == 0 ? path : NULL;
}

const char *backend_nccl_executable(char *path, size_t pathlen) { return nccl_trainer(path, pathlen); }

int backend_handoff(const run_config *cfg, char *path, size_t pathlen) {
    if (cfg->distributed.backend == BACKEND_CPU) return 0;
    gpu_present present;
    gpu_visible visible;
    gpu_present_scan_host(&present);
    gpu_visible_resolve(getenv("CUDA_VISIBLE_DEVICES"), &present, &visible);
    return visible.count > 0 && nccl_trainer(path, pathlen) != NULL;
}

int backend_select(const run_config *cfg, int ranks_here, char *why, size_t whylen) {
    backend_kind asked = cfg->distributed.backend;
    int world = ranks_here;
    if (asked == BACKEND_CPU) return backend_decide(asked, world, 0, "", why, whylen);
    /* Reached with GPUs only when ddp-trainer-nccl is missing (else backend_handoff). */
    gpu_present present;
    gpu_visible visible;
    gpu_present_scan_host(&present);
    gpu_visible_resolve(getenv("CUDA_VISIBLE_DEVICES"), &present, &visible);
    char nccl[4096] = "";
    if (asked == BACKEND_NCCL && !nccl_trainer(nccl, sizeof nccl)) {
        /* GPUs or not, this installation cannot run nccl: say that first */
        const char *env = getenv("DDPD_TRAINER_NCCL");
        if (env && *env)
            snprintf(why, whylen,
                     "backend nccl needs the GPU backend, ddp-trainer-nccl, but DDPD_TRAINER_NCCL names %s, which is "
                     "not an executable file: point it at a ddp-trainer-nccl, or set distributed.backend to \"cpu\" "
                     "(or \"auto\")",
                     env);
        else
            snprintf(why, whylen,
                     "backend nccl needs the GPU backend, ddp-trainer-nccl, and there is none beside this ddp-trainer "
                     "(no %s): a build without the CUDA toolkit, such as the CPU-only Docker image (%s). Set "
                     "distributed.backend to \"cpu\" (or \"auto\"), or run on a GPU build: the default Docker "
                     "image, or one built where the CUDA toolkit with cuBLAS and NCCL is installed",
                     nccl[0] ? nccl : "ddp-trainer-nccl", visible_note(&visible));
        return -1;
    }
    char note[700];
    if (visible.count > 0)
        snprintf(note, sizeof note, "%s, but this ddp-trainer was built without the GPU backend (ddp-trainer-nccl)",
                 visible.note);
    else
        snprintf(note, sizeof note, "%s", visible_note(&visible));
    return backend_decide(asked, world, 0, note, why, whylen);
}
#endif
