/* The cap on each log of a run (ddpd serve --max-log-bytes-per-run, in the launcher's
 * environment as RUN_DIR_LOG_CAP_ENV: run_dir.h): every write ddpd's own programs make
 * to a run's log (the trainer's log lines, ddp-run's copies of the ranks' output into
 * trainer.log and ranks/rank-N.log) goes through here. The write that would take the
 * file past the cap less RUN_DIR_LOG_CAP_ROOM is cut there, to the byte, and one line
 * follows in that room that says so, naming the cap and the setting; every later write
 * is dropped without a word (the output is still read, so the ranks never block on
 * it). The file's own size decides, so the processes that write one log (a built-in
 * run's launcher and ranks) share its cap without talking to each other. */
#ifndef DDPD_TRAINER_RUN_IO_LOG_CAP_H
#define DDPD_TRAINER_RUN_IO_LOG_CAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t cap;  /* bytes; 0: none */
    bool capped;   /* this writer has met the cap: it writes no more */
} log_cap;

/* The cap from the environment (absent, empty or 0: none; a value that is not a size
 * is said once on stderr and means none). */
void log_cap_init(log_cap *c);

/* Writes n bytes to fd (a file opened O_APPEND) within the cap: whole, cut at the cap
 * (then the line that says so), or not at all. */
void log_cap_write(log_cap *c, int fd, const void *p, size_t n);

#endif
