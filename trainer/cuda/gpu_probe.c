/* The CUDA probe in a child process: see gpu_probe.h. */
#include "gpu_probe.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_TIMEOUT_MS 30000

typedef struct {
    int rc; /* cudaError_t of cudaGetDeviceCount */
    int count;
    char msg[200];
} probe_answer;

static void probe_child(int fd) {
    probe_answer a;
    memset(&a, 0, sizeof a);
    cudaError_t e = cudaGetDeviceCount(&a.count);
    a.rc = (int)e;
    if (e != cudaSuccess)
        snprintf(a.msg, sizeof a.msg, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    ssize_t w = write(fd, &a, sizeof a);
    _exit(w == (ssize_t)sizeof a ? 0 : 1);
}

int gpu_probe_usable(int *count, char *why, size_t whylen) {
    int fds[2];
    *count = 0;
    if (pipe(fds) != 0) {
        snprintf(why, whylen, "cannot probe CUDA: pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, whylen, "cannot probe CUDA: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        probe_child(fds[1]);
    }
    close(fds[1]);
    probe_answer a;
    size_t got = 0;
    int rc = -1;
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    while (got < sizeof a) {
        int r = poll(&pfd, 1, PROBE_TIMEOUT_MS);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            snprintf(why, whylen, "the CUDA probe did not answer within %d s", PROBE_TIMEOUT_MS / 1000);
            kill(pid, SIGKILL);
            break;
        }
        ssize_t n = read(fds[0], (char *)&a + got, sizeof a - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            snprintf(why, whylen, "the CUDA probe exited without an answer");
            break;
        }
        got += (size_t)n;
    }
    close(fds[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    if (got == sizeof a) {
        if (a.rc == 0) {
            *count = a.count;
            rc = 0;
        } else {
            a.msg[sizeof a.msg - 1] = '\0';
            snprintf(why, whylen, "%s", a.msg);
        }
    }
    return rc;
}
