/* The names of a run directory's files: a contract between the server (which
 * writes config.json and serves the logs), ddp-trainer and ddp-run (which write the
 * log, the journal and the ranks' logs), and an agent or a Slurm node's `ddpd part`
 * (which writes the config it was sent and forwards the logs), as the schemas beside
 * it are. Spelled here once; the checkpoints' folder is trainer/ckpt_files's
 * CKPT_DIR, with the checkpoint files' own names. Each name is a string literal, so
 * that a path is written "%s/" RUN_DIR_LOG. */
#ifndef DDPD_SCHEMA_RUN_DIR_H
#define DDPD_SCHEMA_RUN_DIR_H

#define RUN_DIR_CONFIG "config.json"   /* the run's config, as this host's trainer reads it */
#define RUN_DIR_LOG "trainer.log"      /* the launcher's output: the run's log */
#define RUN_DIR_JOURNAL "events.jsonl" /* every event, in order: the journal */
#define RUN_DIR_RANKS "ranks"          /* a command run's ranks' own files */
#define RUN_DIR_STOP_REASON "stop-reason.txt" /* why ddpd stops (not cancels) a command run, written before its SIGTERM */
#define RUN_DIR_RANK_LOG "ranks/rank-%d.log"          /* a rank's output (its global rank) */
#define RUN_DIR_RANK_ERROR "ranks/rank-%d.error.json" /* TORCHELASTIC_ERROR_FILE */

/* The cap on each log of a run (ddpd serve --max-log-bytes-per-run): the launchers
 * find it in their environment, and write a log only up to RUN_DIR_LOG_CAP_ROOM bytes
 * short of it; the write that would pass that is cut there, and one line in that room
 * says so. So a log longer than the cap less the room has reached it. */
#define RUN_DIR_LOG_CAP_ENV "DDPD_MAX_LOG_BYTES_PER_RUN"
#define RUN_DIR_LOG_CAP_ROOM 512

#endif
