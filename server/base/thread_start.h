/* Starting and stopping the server's own threads (the store's writer, ingest, the
 * accept thread, the feed's ticker, the searcher), one way: a thread that cannot be
 * started is said in a sentence that names it, and a thread that waits on a
 * condition is stopped by setting its flag under its lock, waking it and joining. */
#ifndef DDPD_SERVER_BASE_THREAD_START_H
#define DDPD_SERVER_BASE_THREAD_START_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* Starts fn(NULL) on *t and sets *started: 0, or -1 with "cannot start WHAT" in err. */
int thread_start(pthread_t *t, void *(*fn)(void *), bool *started, const char *what, char *err, size_t errlen);

/* When *started: sets *stopping under mu, wakes every waiter on cv, joins t and
 * clears *started. */
void thread_stop(pthread_t t, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stopping, bool *started);

#endif
