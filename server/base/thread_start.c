/* The server's threads: see thread_start.h. */
#include "thread_start.h"

#include <stdio.h>

int thread_start(pthread_t *t, void *(*fn)(void *), bool *started, const char *what, char *err, size_t errlen) {
    if (pthread_create(t, NULL, fn, NULL) != 0) {
        snprintf(err, errlen, "cannot start %s", what);
        return -1;
    }
    *started = true;
    return 0;
}

void thread_stop(pthread_t t, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stopping, bool *started) {
    if (!*started) return;
    pthread_mutex_lock(mu);
    *stopping = true;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
    pthread_join(t, NULL);
    *started = false;
}
