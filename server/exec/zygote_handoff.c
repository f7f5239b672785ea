/* The warm start's handoff: see zygote_handoff.h. Async-signal-safe calls only. */
#include "zygote_handoff.h"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define HANDOFF_WAIT_MS 3000 /* a fork of a loaded interpreter on a busy host; past it, the trial starts cold */

static long number_after(const char *text, size_t n, const char *key) {
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl <= n; i++)
        if (memcmp(text + i, key, kl) == 0) {
            size_t j = i + kl;
            while (j < n && (text[j] == ' ' || text[j] == '\t' || text[j] == ':')) j++;
            long v = 0;
            int digits = 0;
            while (j < n && text[j] >= '0' && text[j] <= '9' && digits < 10) v = v * 10 + (text[j++] - '0'), digits++;
            return digits ? v : -1;
        }
    return -1;
}

static void put_number(char *at, long v) {
    char d[16];
    int n = 0;
    do d[n++] = (char)('0' + v % 10), v /= 10;
    while (v && n < 15);
    for (int i = 0; i < n; i++) at[i] = d[n - 1 - i];
    at[n] = '\0';
}

/* Whether /proc/PID/status says pid is a child of `parent` whose every uid is `uid`. */
static int is_zygote_child(long pid, pid_t parent, uid_t uid) {
    char path[40] = "/proc/";
    put_number(path + 6, pid);
    size_t l = strlen(path);
    memcpy(path + l, "/status", 8);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    if (number_after(buf, (size_t)n, "\nPPid:") != (long)parent) return 0;
    for (ssize_t i = 0; i + 5 < n; i++)
        if (memcmp(buf + i, "\nUid:", 5) == 0) {
            long ids[4];
            const char *p = buf + i + 5, *end = buf + n;
            for (int k = 0; k < 4; k++) {
                while (p < end && (*p == ' ' || *p == '\t')) p++;
                long v = -1;
                if (p < end && *p >= '0' && *p <= '9') v = 0;
                while (p < end && *p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
                ids[k] = v;
            }
            return ids[0] == (long)uid && ids[1] == (long)uid && ids[2] == (long)uid && ids[3] == (long)uid;
        }
    return 0;
}

static long ms_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Whether the zygote listens: its socket is renamed into place once it does. Waited for
 * on events (the directory's inotify, the zygote's pidfd: a failed import ends it) up
 * to ZYGOTE_READY_WAIT_MS; 0 when it is there, 1 when the zygote ended first, -1
 * otherwise (no time left, nothing to wait on). */
static int wait_ready(const warm_handle *h) {
    struct stat st;
    if (lstat(h->socket, &st) == 0) return 0;
    if (h->zygote <= 0) return -1;
    char dir[sizeof h->socket];
    size_t n = strlen(h->socket);
    while (n > 0 && h->socket[n - 1] != '/') n--;
    if (n < 2) return -1;
    memcpy(dir, h->socket, n - 1);
    dir[n - 1] = '\0';
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (in < 0 || inotify_add_watch(in, dir, IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF) < 0) {
        if (in >= 0) close(in);
        return -1;
    }
    int pidfd = (int)syscall(SYS_pidfd_open, h->zygote, 0); /* -1 on an old kernel: its end is polled */
    long deadline = ms_now() + ZYGOTE_READY_WAIT_MS;
    int ready = -1;
    for (;;) {
        if (lstat(h->socket, &st) == 0) {
            ready = 0;
            break;
        }
        if (pidfd < 0 && kill(h->zygote, 0) != 0) {
            ready = 1;
            break;
        }
        long left = deadline - ms_now();
        if (left <= 0) break;
        struct pollfd p[2] = {{.fd = in, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
        int r = poll(p, pidfd >= 0 ? 2 : 1, pidfd >= 0 ? (int)left : (left < 200 ? (int)left : 200));
        if (r > 0 && pidfd >= 0 && (p[1].revents & (POLLIN | POLLHUP))) { /* it ended: one last look */
            ready = lstat(h->socket, &st) == 0 ? 0 : 1;
            break;
        }
        char drain[4096];
        while (read(in, drain, sizeof drain) > 0) {
        }
    }
    close(in);
    if (pidfd >= 0) close(pidfd);
    return ready;
}

static void put(const char *s) {
    ssize_t w = write(1, s, strlen(s));
    (void)w;
}

/* The trial's log (the child's stdout) says that it starts cold because its zygote
 * ended before it was ready, with the zygote's last line (its import's error), read
 * from zygote.log beside its socket without following a link. */
static void say_failed(const warm_handle *h) {
    char path[sizeof h->socket + 16], buf[1024];
    size_t n = strlen(h->socket);
    while (n > 0 && h->socket[n - 1] != '/') n--;
    memcpy(path, h->socket, n);
    memcpy(path + n, "zygote.log", 11);
    ssize_t got = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        off_t from = st.st_size > (off_t)sizeof buf - 1 ? st.st_size - (off_t)sizeof buf + 1 : 0;
        got = pread(fd, buf, sizeof buf - 1, from);
    }
    if (fd >= 0) close(fd);
    if (got < 0) got = 0;
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r')) got--;
    buf[got] = '\0';
    const char *line = buf;
    for (ssize_t i = 0; i < got; i++)
        if (buf[i] == '\n') line = buf + i + 1;
    put("ddpd: warm start: this trial starts cold: the zygote of its sweep ended before it was ready: ");
    put(line[0] ? line : "no output");
    put("\n");
}

void zygote_handoff(const warm_handle *h, uid_t uid, const run_cgroup *g, char **env) {
    char *slot = NULL;
    for (int i = 0; env && env[i]; i++)
        if (strncmp(env[i], WARM_FD_VAR, sizeof WARM_FD_VAR - 1) == 0) slot = env[i] + sizeof WARM_FD_VAR - 1;
    if (!slot) return;
    slot[0] = '\0';
    if (!h->socket[0] || h->zygote <= 0 || g->n == 0) return; /* without a cgroup to move it into: cold */
    struct stat st;
    int ready = wait_ready(h);
    if (ready == 1) say_failed(h);
    if (ready != 0) return;
    if (lstat(h->socket, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != uid) return;
    int s = socket(AF_UNIX, SOCK_STREAM, 0); /* not close-on-exec: it is ddp-run's */
    if (s < 0) return;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(h->socket) >= sizeof a.sun_path) goto fail;
    memcpy(a.sun_path, h->socket, strlen(h->socket) + 1);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) goto fail;
    static const char ask[] = "{\"op\": \"fork\"}\n";
    if (send(s, ask, sizeof ask - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof ask - 1)) goto fail;
    char buf[256];
    size_t got = 0;
    while (got < sizeof buf && !memchr(buf, '\n', got)) {
        struct pollfd p = {.fd = s, .events = POLLIN};
        if (poll(&p, 1, HANDOFF_WAIT_MS) <= 0) goto fail;
        ssize_t n = recv(s, buf + got, sizeof buf - got, 0);
        if (n <= 0) goto fail;
        got += (size_t)n;
    }
    long pid = number_after(buf, got, "\"pid\"");
    if (pid <= 1 || !is_zygote_child(pid, h->zygote, uid)) goto fail;
    char num[16];
    put_number(num, pid);
    for (int i = 0; i < g->n; i++) { /* into the trial's cgroups: its CPUs, its limits, its end */
        int fd = open(g->procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0) goto fail;
        ssize_t w = write(fd, num, strlen(num));
        close(fd);
        if (w < 0) goto fail;
    }
    if (!is_zygote_child(pid, h->zygote, uid)) goto fail; /* still the one checked: no pid reused between */
    put_number(slot, s);
    return;
fail:
    close(s); /* the trial zygote, if any, sees the end and exits */
}
