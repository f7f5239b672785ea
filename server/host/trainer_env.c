/* The settings passed on to a run's launcher: see trainer_env.h. */
#include "trainer_env.h"

#include "run_dir.h"

const char *const TRAINER_PASSED_ON[] = {"DDPD_CACHE_DIR", "DDPD_COLLECTIVE_TIMEOUT_S", "DDPD_RENDEZVOUS_TIMEOUT_S",
                                         "DDPD_CPU_CONV", "DDPD_TRAINER_NCCL", "DDPD_RESTART_BACKOFF_S",
                                         RUN_DIR_LOG_CAP_ENV};
const size_t TRAINER_PASSED_ON_COUNT = sizeof TRAINER_PASSED_ON / sizeof *TRAINER_PASSED_ON;
_Static_assert(sizeof TRAINER_PASSED_ON / sizeof *TRAINER_PASSED_ON <= TRAINER_PASSED_ON_MAX, "TRAINER_PASSED_ON_MAX");
