/* One server per state directory: see state_lock.h. */
#include "state_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "monotonic.h"
#include "die.h"
#include "server_log.h"

static bool take(int fd) { return flock(fd, LOCK_EX | LOCK_NB) == 0; }

/* The pid the holder wrote, 0 when none (yet). */
static long holder_pid(int fd) {
    char pid[32] = "";
    ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
    pid[n > 0 ? n : 0] = '\0';
    char *end;
    long v = strtol(pid, &end, 10);
    return end != pid && v > 0 ? v : 0;
}

static bool alive(long pid) { return kill((pid_t)pid, 0) == 0 || errno == EPERM; }

int state_lock_take(const char *lock_path, const char *state_dir, int wait_ms) {
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) die("cannot open %s: %s", lock_path, strerror(errno));
    if (!take(fd)) {
        long pid = holder_pid(fd);
        if (!pid || alive(pid))
            die("another ddpd%s%ld%s is serving %s: stop it, or use another --state-dir", pid ? " (pid " : "", pid,
                pid ? ")" : "", state_dir);
        log_info("the lock of %s is held, though the ddpd that took it (pid %ld) is gone: waiting up to %d ms for "
                 "the process it was starting a run with to let go of it",
                 state_dir, pid, wait_ms);
        int64_t until = mono_ms() + wait_ms;
        bool got = false;
        while (!(got = take(fd)) && mono_ms() < until) nanosleep(&(struct timespec){.tv_nsec = 20 * 1000000L}, NULL);
        if (!got)
            die("the lock of %s (%s) is still held, though the ddpd that took it (pid %ld) is gone: a process it "
                "started holds it; find it with `fuser -v %s` and end it, or use another --state-dir",
                state_dir, lock_path, pid, lock_path);
    }
    if (ftruncate(fd, 0) == 0) dprintf(fd, "%d\n", (int)getpid());
    return fd;
}
