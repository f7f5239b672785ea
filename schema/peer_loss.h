/* The words with which collective libraries (gloo, NCCL, a TCP store) report that a
 * peer went away: a rank, or a node's part of a run, whose failure says one of them
 * failed because another did. Shared by ddp-run (which rank of a node to blame) and
 * the server (which node of a run across nodes to blame). */
#ifndef DDPD_SCHEMA_PEER_LOSS_H
#define DDPD_SCHEMA_PEER_LOSS_H

#include <stdbool.h>

bool says_peer_lost(const char *text);

#endif
