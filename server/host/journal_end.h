/* The launcher's last word in a run's journal (events.jsonl): its `end` event, read
 * from the end of the file. What the coordinator reads of a run's local part across
 * nodes, and what an agent reports of each part it ran. */
#ifndef DDPD_SERVER_HOST_JOURNAL_END_H
#define DDPD_SERVER_HOST_JOURNAL_END_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char status[16];   /* "succeeded", "failed", "canceled" */
    char reason[2048]; /* "" when it gave none */
    int64_t t;         /* unix ms, the node's clock */
} journal_end;

/* The journal of the run directory `run_dir`, opened as run_files.h opens a run's
 * files. false when it has no launcher `end` (among its last 256 KiB), or is not the
 * run's own file. */
bool journal_end_read(const char *run_dir, journal_end *out);

#endif
