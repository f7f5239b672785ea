/* Run statuses: see run_status.h. */
#include "run_status.h"

#include <string.h>

static const char *const NAMES[RUN_STATUS_COUNT] = {
    [RUN_QUEUED] = "queued",       [RUN_STARTING] = "starting", [RUN_RUNNING] = "running",
    [RUN_CANCELING] = "canceling", [RUN_SUCCEEDED] = "succeeded", [RUN_FAILED] = "failed",
    [RUN_CANCELED] = "canceled",   [RUN_STOPPED] = "stopped",    [RUN_TIMEOUT] = "timeout",
};

const char *run_status_name(run_status s) { return s >= 0 && s < RUN_STATUS_COUNT ? NAMES[s] : "unknown"; }

bool run_status_parse(const char *s, run_status *out) {
    for (int i = 0; s && i < RUN_STATUS_COUNT; i++) {
        if (strcmp(s, NAMES[i]) == 0) {
            *out = (run_status)i;
            return true;
        }
    }
    return false;
}

bool run_status_is_final(run_status s) {
    return s == RUN_SUCCEEDED || s == RUN_FAILED || s == RUN_CANCELED || s == RUN_STOPPED || s == RUN_TIMEOUT;
}

bool run_status_is_active(run_status s) { return s == RUN_STARTING || s == RUN_RUNNING || s == RUN_CANCELING; }
