/* The warm start's handoff (zygotes.h): in the supervisor's forked child, still root
 * and already in the trial's cgroup, the sweep's zygote waited for while it imports
 * (its socket appears when it listens; its end, a failed import, means cold at once),
 * then a trial zygote asked of it,
 * checked (the zygote's child, every uid the trial's account's), moved into the
 * trial's cgroup and its connection left open for ddp-run (DDPD_WARM_FD). */
#ifndef DDPD_SERVER_EXEC_ZYGOTE_HANDOFF_H
#define DDPD_SERVER_EXEC_ZYGOTE_HANDOFF_H

#include <stdint.h>
#include <sys/types.h>

#include "run_cgroup.h"

#define WARM_FD_VAR "DDPD_WARM_FD="
#define WARM_FD_SLOT "DDPD_WARM_FD=        " /* the child writes the number in */

#define ZYGOTE_READY_WAIT_MS 180000 /* a zygote still importing this long: the trial starts cold */

typedef struct {
    char socket[512]; /* "": start cold */
    pid_t zygote;     /* 0: its spawn not yet answered: resolve(key) on the supervisor's thread before the fork */
    int64_t key;
    pid_t (*resolve)(int64_t key);
} warm_handle;

/* In the forked child (root, in the trial's cgroup `g`, before it becomes `uid`): a
 * trial zygote from the zygote at `h`, moved into `g`, its connection left open for the
 * exec and its number written into env's DDPD_WARM_FD slot. Async-signal-safe; on any
 * failure the slot stays empty (ddp-run starts the ranks cold). */
void zygote_handoff(const warm_handle *h, uid_t uid, const run_cgroup *g, char **env);

#endif
