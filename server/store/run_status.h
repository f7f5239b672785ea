/* A run's life: queued -> starting -> running -> succeeded | failed | canceled | stopped
 * | timeout, with canceling on the way to canceled and stopped (stopped: a sweep's trial
 * its searcher stopped, server/sweep/; timeout: it reached its max_duration_s). The one list of statuses: the store's CHECK
 * constraint (migrations/0001_init.sql) and the API's enum (schema/openapi.json) are
 * held against it by tests/unit/server/test_run_status.c. */
#ifndef DDPD_SERVER_STORE_RUN_STATUS_H
#define DDPD_SERVER_STORE_RUN_STATUS_H

#include <stdbool.h>

typedef enum {
    RUN_QUEUED,
    RUN_STARTING,
    RUN_RUNNING,
    RUN_CANCELING,
    RUN_SUCCEEDED,
    RUN_FAILED,
    RUN_CANCELED,
    RUN_STOPPED,
    RUN_TIMEOUT,
    RUN_STATUS_COUNT
} run_status;

/* "queued", ... */
const char *run_status_name(run_status s);
/* false when `s` names no status. */
bool run_status_parse(const char *s, run_status *out);
/* succeeded, failed, canceled, stopped, timeout: it never changes again (but a resume). */
bool run_status_is_final(run_status s);
/* starting, running, canceling: it holds devices and has processes. */
bool run_status_is_active(run_status s);

#endif
