/* The reason ddpd gave for stopping a run: see stop_reason.h. */
#include "stop_reason.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_dir.h"
#include "utf8_text.h"

bool stop_reason_read(const char *run_dir, char *out, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" RUN_DIR_STOP_REASON, run_dir);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    ssize_t got = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && n > 1) got = read(fd, out, n - 1);
    close(fd);
    if (got <= 0) return false;
    out[got] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
    utf8_repair(out);
    return out[0] != '\0';
}

void stop_reason_clear(const char *run_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" RUN_DIR_STOP_REASON, run_dir);
    unlink(path);
}
