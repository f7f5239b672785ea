/* Which part of a failed run across nodes is to blame: a pure rule over how each part
 * ended, so that it is tested alone (tests/unit/server/test_part_blame.c).
 *
 * A part failed on its own unless it ended by the stop it was sent: an agent hears of
 * a stop at its next heartbeat, so a part whose launcher ended before the stop was
 * given, or that says why other than by the stop (its launcher then ends "canceled
 * by SIGTERM"), failed on its own and is heard of only now. Among the parts that did
 * not succeed, the likeliest cause is one that failed on its own before one stopped;
 * then one whose reason is its own before one that only lost a peer (peer_loss.h: a
 * rank's failure makes the other nodes' ranks lose their peers within milliseconds,
 * and their launchers may well end first); then the one whose launcher ended first. */
#ifndef DDPD_SERVER_SCHED_PART_BLAME_H
#define DDPD_SERVER_SCHED_PART_BLAME_H

#include <stdbool.h>
#include <stdint.h>

/* How a part ended. */
typedef struct {
    int64_t exit_code;  /* its launcher's exit status: 0 it succeeded; NO_INT none (lost, killed) */
    const char *reason; /* its launcher's end, or what became of its node; NULL: none */
    int64_t end_t;      /* when its launcher ended (unix ms) */
    bool stop;          /* it was told to stop */
    int64_t stop_t;     /* when (unix ms) */
} part_fate;

/* It did not succeed, and not because of the stop it was sent. */
bool part_failed_on_its_own(const part_fate *f);

/* The index of the likeliest cause among the n parts that did not succeed; -1 when
 * every part succeeded. */
int part_to_blame(const part_fate *parts, int n);

#endif
