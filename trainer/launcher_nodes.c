/* A run across nodes, as the launcher sees it: this node's share of the ranks, and
 * how its ranks meet the other nodes' (the cpu backend's gloo link, or NCCL's unique
 * id relayed by node 0), through the coordinator's rendezvous. */
#include <stdio.h>
#include <stdlib.h>

#include "launcher.h"
#include "launcher_state.h"
#include "env_seconds.h"
#include "kv_store.h"
#if DDPD_NODES_GLOO
#include "coll_nodes.h"
#endif

/* Across nodes: how long a rank waits for the other nodes' ranks to come (they start
 * when their agents hear of the run, about a second apart, and load their data;
 * DDPD_RENDEZVOUS_TIMEOUT_S overrides it). A collective between nodes gives up after
 * the hang watch's time and a minute more, so that the hang watch, which names the
 * rank that stopped, speaks first (a week when the watch is off;
 * DDPD_COLLECTIVE_TIMEOUT_S overrides it). */
#define RENDEZVOUS_TIMEOUT_S 120.0
#define NODES_COLLECTIVE_SLACK_S 60.0
#define NODES_COLLECTIVE_UNWATCHED_S (7 * 86400.0)

/* This node's ranks, when the run spans nodes; -1 (said on stderr) when the command
 * line cannot be right. */
int launcher_plan_nodes(launcher *L) {
    const launcher_options *o = L->o;
    int nodes = o->nodes > 0 ? o->nodes : 1;
    if (o->node_rank < 0 || o->node_rank >= nodes) {
        fprintf(stderr, "ddp-trainer: --node-rank %d is not one of the %d nodes (0 to %d)\n", o->node_rank, nodes,
                nodes - 1);
        return -1;
    }
    if (L->world % nodes != 0) {
        fprintf(stderr, "ddp-trainer: distributed.world_size %d does not divide into %d nodes\n", L->world, nodes);
        return -1;
    }
    if (nodes > 1 && (!o->rendezvous || !o->node_addr)) {
        fprintf(stderr, "ddp-trainer: --nodes %d needs --rendezvous URL (the coordinator's) and --node-addr ADDR (this "
                "node's address): ddpd passes both\n", nodes);
        return -1;
    }
    L->local = L->world / nodes;
    L->first = o->node_rank * L->local;
    return 0;
}

/* Across nodes, the cpu backend: this rank's node comm and its gloo link to the same
 * local rank on the other nodes, met through the coordinator's rendezvous. NULL and
 * why on failure. */
coll_comm *launcher_join_nodes(launcher *L, coll_comm *local, int slot, char *why, size_t whylen) {
#if DDPD_NODES_GLOO
    char prefix[64];
    kv_store *kv = kv_http_open(L->o->rendezvous, L->secret, why, whylen);
    if (!kv) return NULL;
    snprintf(prefix, sizeof prefix, "gloo/local-%d/", slot);
    const char *iface = getenv("GLOO_SOCKET_IFNAME");
    double hang_s = L->cfg.distributed.hang_timeout_s;
    int watched = hang_s > 0;
    gloo_link_options o = {
        .store = kv,
        .prefix = prefix,
        .rank = L->o->node_rank,
        .size = L->o->nodes,
        .iface = iface && *iface ? iface : NULL,
        .hostname = L->o->node_addr,
        .connect_timeout_ms = (int)(env_seconds("DDPD_RENDEZVOUS_TIMEOUT_S", RENDEZVOUS_TIMEOUT_S) * 1000),
        .timeout_ms = (int)(env_seconds("DDPD_COLLECTIVE_TIMEOUT_S", watched ? hang_s + NODES_COLLECTIVE_SLACK_S
                                                                          : NODES_COLLECTIVE_UNWATCHED_S) * 1000),
    };
    gloo_link *link = gloo_link_open(&o, why, whylen);
    kv->close(kv); /* met: the link talks directly from now on */
    if (!link) return NULL;
    coll_comm *c = coll_nodes_create(local, link, L->o->nodes, L->o->node_rank);
    if (!c) snprintf(why, whylen, "out of memory");
    return c;
#else
    (void)L, (void)local, (void)slot;
    if (DDPD_NCCL_BACKEND) /* a CPU run in the GPU build: backend auto, too few GPUs */
        snprintf(why, whylen, "ddp-trainer-nccl runs GPU runs across nodes, not CPU ones: set distributed.backend to "
                 "\"cpu\" (ddp-trainer runs those, over gloo), or give each node a GPU per rank");
    else
        snprintf(why, whylen, "this ddp-trainer was built without gloo (libgloo-dev), which a CPU run across nodes "
                 "needs: install libgloo-dev and build again, or run it on one node");
    return NULL;
#endif
}

#if DDPD_NCCL_BACKEND
/* nccl hook: NCCL's unique id, made here on one host; across nodes, made by node 0's
 * launcher and relayed to the others through the coordinator's rendezvous. */
int launcher_nccl_id_made(launcher *L, char *why, size_t whylen) {
    int rc;
    if (L->o->nodes <= 1) {
        rc = nccl_rendezvous_create(&L->nccl, L->world, why, whylen);
    } else {
        kv_store *kv = kv_http_open(L->o->rendezvous, L->secret, why, whylen);
        if (!kv) return -1;
        int timeout_ms = (int)(env_seconds("DDPD_RENDEZVOUS_TIMEOUT_S", RENDEZVOUS_TIMEOUT_S) * 1000);
        rc = nccl_rendezvous_across(&L->nccl, L->world, L->o->nodes, L->o->node_rank, kv, timeout_ms, why, whylen);
        kv->close(kv);
    }
    L->nccl.timeout_s = L->cfg.distributed.collective_timeout_s;
    return rc;
}
#endif
