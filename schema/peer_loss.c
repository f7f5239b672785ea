/* Words that mean a peer went away: see peer_loss.h. */
#include "peer_loss.h"

#include <string.h>

bool says_peer_lost(const char *text) {
    static const char *const SIGNS[] = {"Connection closed by peer", "Connection reset by peer", "Broken pipe",
                                        "communicator was aborted", "NCCL communicator", "ProcessGroupGloo",
                                        "failed to recv", "failed to send", "Socket Timeout",
                                        /* gloo waiting for a peer that never answered */
                                        "Timed out waiting",
                                        /* ddp-trainer's hang watch on a node whose ranks only waited */
                                        "may be on another node"};
    for (size_t i = 0; text && i < sizeof SIGNS / sizeof *SIGNS; i++)
        if (strstr(text, SIGNS[i])) return true;
    return false;
}
