/* Who may write a run's journal: see journal_writers.h. */
#include "journal_writers.h"

#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "base.h"

static pthread_mutex_t M = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t WAKE = PTHREAD_COND_INITIALIZER;
static bool woken;
static int64_t *started; /* ids, unordered */
static size_t n_started, cap_started;

static ptrdiff_t index_of(int64_t id) {
    for (size_t i = 0; i < n_started; i++)
        if (started[i] == id) return (ptrdiff_t)i;
    return -1;
}

void journal_writers_started(int64_t id) {
    pthread_mutex_lock(&M);
    if (index_of(id) < 0) {
        if (n_started == cap_started)
            started = xrealloc(started, (cap_started = cap_started ? cap_started * 2 : 16) * sizeof *started);
        started[n_started++] = id;
    }
    pthread_mutex_unlock(&M);
}

void journal_writers_finished(int64_t id) {
    pthread_mutex_lock(&M);
    ptrdiff_t i = index_of(id);
    if (i >= 0) started[i] = started[--n_started];
    woken = true;
    pthread_cond_signal(&WAKE);
    pthread_mutex_unlock(&M);
}

void journal_writers_lock(void) { pthread_mutex_lock(&M); }
void journal_writers_unlock(void) { pthread_mutex_unlock(&M); }
bool journal_writers_has(int64_t id) { return index_of(id) >= 0; }

bool journal_writers_wait(int seconds) {
    if (!woken) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += seconds;
        pthread_cond_timedwait(&WAKE, &M, &until);
    }
    bool was = woken;
    woken = false;
    return was;
}

void journal_writers_wake(void) {
    pthread_mutex_lock(&M);
    woken = true;
    pthread_cond_signal(&WAKE);
    pthread_mutex_unlock(&M);
}
