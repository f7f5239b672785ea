/* The server's own DDPD_* settings stay with the server (the token among them), but
 * the ones a run's launcher reads too are passed on by name, by the coordinator and
 * by every agent alike: where the dataset cache lies, the collectives' and the
 * rendezvous' timeouts, the CPU convolutions' implementation, which
 * ddp-trainer-nccl takes GPU runs (the one `ddpd check` names), the pause before
 * a run's restart (distributed.max_restarts), and the cap on each of a run's logs
 * (ddpd serve --max-log-bytes-per-run, which serve puts in its own environment). */
#ifndef DDPD_SERVER_HOST_TRAINER_ENV_H
#define DDPD_SERVER_HOST_TRAINER_ENV_H

#include <stddef.h>

extern const char *const TRAINER_PASSED_ON[];
extern const size_t TRAINER_PASSED_ON_COUNT;
/* The most there are: for arrays sized at compile time. */
#define TRAINER_PASSED_ON_MAX 8

#endif
