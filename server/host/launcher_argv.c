/* A run's launcher's command line and environment: see launcher_argv.h. */
#include "launcher_argv.h"

#include <stdio.h>
#include <stdlib.h>

#include "base.h"

char *const LAUNCHER_ENV_DROP[] = {"DDPD_", NULL};

void launcher_cmd_build(const launcher_spec *s, launcher_cmd *out) {
    const char **argv = out->argv;
    int argc = 0;
    argv[argc++] = s->program;
    argv[argc++] = "--config";
    argv[argc++] = s->config;
    argv[argc++] = "--run-dir";
    argv[argc++] = s->run_dir;
    argv[argc++] = "--events";
    argv[argc++] = s->events;
    if (s->command) {
        snprintf(out->numbers[0], sizeof out->numbers[0], "%d", s->master_port);
        argv[argc++] = "--master-port";
        argv[argc++] = out->numbers[0];
        if (s->port_lo > 0 && s->port_hi >= s->port_lo) {
            snprintf(out->numbers[3], sizeof out->numbers[3], "%d-%d", s->port_lo, s->port_hi);
            argv[argc++] = "--port-range";
            argv[argc++] = out->numbers[3];
        }
        if (s->graces) {
            snprintf(out->numbers[6], sizeof out->numbers[6], "%d", s->stop_grace_s);
            snprintf(out->numbers[7], sizeof out->numbers[7], "%d", s->preempt_grace_s);
            argv[argc++] = "--stop-grace";
            argv[argc++] = out->numbers[6];
            argv[argc++] = "--preempt-grace";
            argv[argc++] = out->numbers[7];
        }
    }
    if (s->nodes > 0) {
        snprintf(out->numbers[1], sizeof out->numbers[1], "%d", s->nodes);
        snprintf(out->numbers[2], sizeof out->numbers[2], "%d", s->node_rank);
        argv[argc++] = "--nodes";
        argv[argc++] = out->numbers[1];
        argv[argc++] = "--node-rank";
        argv[argc++] = out->numbers[2];
        if (s->command) {
            argv[argc++] = "--master-addr";
            argv[argc++] = s->master_addr;
        } else {
            argv[argc++] = "--node-addr";
            argv[argc++] = s->node_addr;
            argv[argc++] = "--rendezvous";
            argv[argc++] = s->rendezvous;
        }
    }
    if (s->restart_count > 0) {
        snprintf(out->numbers[4], sizeof out->numbers[4], "%d", s->restart_count);
        argv[argc++] = "--restart-count";
        argv[argc++] = out->numbers[4];
        if (s->restarts_from != s->restart_count) {
            snprintf(out->numbers[5], sizeof out->numbers[5], "%d", s->restarts_from);
            argv[argc++] = "--restarts-from";
            argv[argc++] = out->numbers[5];
        }
    }
    if (s->resume && !s->command) argv[argc++] = "--resume";
    if (s->ranks > 0) {
        snprintf(out->numbers[8], sizeof out->numbers[8], "%d", s->ranks);
        argv[argc++] = "--ranks";
        argv[argc++] = out->numbers[8];
    }
    for (int i = 0; !s->command && i < s->n_data_roots && i < LAUNCHER_DATA_ROOTS_MAX; i++) {
        argv[argc++] = "--data-root";
        argv[argc++] = s->data_roots[i];
    }
    argv[argc] = NULL;

    int envc = launcher_env_common(s->run_id, s->secret, out->env);
    out->env[envc++] = xasprintf("CUDA_VISIBLE_DEVICES=%s", s->visible ? s->visible : "");
    out->env[envc] = NULL;
}

int launcher_env_common(int64_t run_id, const char *secret, char **env) {
    int envc = 0;
    env[envc++] = xasprintf("DDPD_RUN_ID=%lld", (long long)run_id);
    env[envc++] = xasprintf("DDPD_RUN_SECRET=%s", secret);
    for (size_t i = 0; i < TRAINER_PASSED_ON_COUNT; i++)
        if (getenv(TRAINER_PASSED_ON[i]))
            env[envc++] = xasprintf("%s=%s", TRAINER_PASSED_ON[i], getenv(TRAINER_PASSED_ON[i]));
    env[envc] = NULL;
    return envc;
}

void launcher_cmd_free(launcher_cmd *c) {
    for (size_t i = 0; c->env[i]; i++) free(c->env[i]);
    c->env[0] = NULL;
}
