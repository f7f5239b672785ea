/* The C harness (check.h) itself: a test that made no check fails, as does one
 * with a failed check; one whose checks all passed succeeds. Each verdict is
 * taken in a child process, so the counters start at zero there. */
#include "check.h"

#include <sys/wait.h>
#include <unistd.h>

static int verdict_of(int passing, int failing) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(99);
        for (int i = 0; i < passing; i++) CHECK(1, "passes");
        for (int i = 0; i < failing; i++) CHECK(0, "fails");
        _exit(test_done("child"));
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

int main(void) {
    CHECK(verdict_of(0, 0) == 1, "a test that made no check fails");
    CHECK(verdict_of(3, 0) == 0, "a test whose checks passed succeeds");
    CHECK(verdict_of(3, 1) == 1, "a test with a failed check fails");
    CHECK(verdict_of(0, 1) == 1, "a test with only a failed check fails");
    return test_done("test_check_harness");
}
