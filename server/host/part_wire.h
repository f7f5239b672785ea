/* A part's description on the wire: what the coordinator tells a part that runs
 * elsewhere to start (an agent's part, in a heartbeat's answer; a Slurm job's node,
 * `ddpd part`, in the answer to its report). Its one writer (the coordinator's
 * exec/part_desc.c) and its one reader (agent/agent_parts.c) are here, so that
 * the two ends cannot drift apart on a member's name, type or meaning. */
#ifndef DDPD_SERVER_HOST_PART_WIRE_H
#define DDPD_SERVER_HOST_PART_WIRE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t run;
    int node_rank;           /* its node among `nodes` (0: rank 0's node) */
    int nodes;               /* 0: the run is this one part */
    int world_size;
    bool command;            /* ddp-run, not ddp-trainer */
    bool resume;             /* from the newest checkpoint */
    bool gpu;                /* its devices are GPUs (ids), else CPU slots (indices) */
    const char *secret;      /* DDPD_RUN_SECRET */
    const char *master_addr; /* rank 0's node ("": not known yet) */
    int master_port;         /* a command run's MASTER_PORT there */
    const char *rendezvous;  /* a path under the coordinator's URL */
    int restart_count;       /* the attempt it starts at */
    int restarts_from;       /* the attempt its restarts count from */
    bool graces;             /* a command run: the coordinator's graces below (else ddp-run's own) */
    int stop_grace_s, preempt_grace_s;
    int port_lo, port_hi;    /* a command run's --port-range (0, 0: none given) */
    const json_t *config;    /* the run's config as the trainer reads it (NULL: written as null) */
    const json_t *devices;   /* its devices on that node (NULL: none listed) */
    const char *account;     /* the Unix account its processes run as there, by name (the run's, run_as.h);
                              * NULL: absent, the node's own user (the agent's) */
} part_wire;

/* w as JSON (a new reference; config and devices are copied by reference). */
json_t *part_wire_write(const part_wire *w);

/* j read into w, whose strings, config and devices point into j (valid while j is).
 * false, with what is missing or wrong in why, when j is not a whole description. */
bool part_wire_read(const json_t *j, part_wire *w, char *why, size_t why_len);

#endif
