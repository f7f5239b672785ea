/* GPU detection for the device pool: see devices.h. */
#include "devices.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"

int devices_parse_list(const char *list, char ***ids) {
    *ids = NULL;
    if (!list || !*list || strcmp(list, "none") == 0) return 0;
    int n = 0;
    char *copy = xstrdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        *ids = xrealloc(*ids, (size_t)(n + 1) * sizeof **ids);
        (*ids)[n++] = xstrdup(tok);
    }
    free(copy);
    return n;
}

/* In the child: cuInit + cuDeviceGetCount through dlopen; the count, or -1. */
static int count_in_child(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return 0; /* no driver: no GPUs */
    int (*cu_init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*cu_count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
    int n = 0;
    if (!cu_init || !cu_count || cu_init(0) != 0 || cu_count(&n) != 0) return 0;
    return n;
}

int devices_detect_gpus(char ***ids) {
    *ids = NULL;
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (visible) return devices_parse_list(visible, ids);

    int fds[2];
    if (pipe(fds) != 0) return 0;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        close(fds[0]);
        int n = count_in_child();
        ssize_t w = write(fds[1], &n, sizeof n);
        _exit(w == sizeof n ? 0 : 1);
    }
    close(fds[1]);
    int n = 0;
    struct pollfd p = {fds[0], POLLIN, 0};
    /* cuInit can take seconds on a big machine; a hung driver must not hang start-up. */
    if (poll(&p, 1, 20000) == 1 && read(fds[0], &n, sizeof n) != (ssize_t)sizeof n) n = 0;
    else if (p.revents == 0) {
        log_warn("GPU detection did not answer within 20 s: managing no GPUs (use --gpus to name them)");
        kill(pid, SIGKILL);
    }
    close(fds[0]);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < n; i++) {
        *ids = xrealloc(*ids, (size_t)(i + 1) * sizeof **ids);
        (*ids)[i] = xasprintf("%d", i);
    }
    return n < 0 ? 0 : n;
}

void devices_free_list(char **ids, int n) {
    for (int i = 0; ids && i < n; i++) free(ids[i]);
    free(ids);
}
