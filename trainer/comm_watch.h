/* Collectives that report progress: a coll_comm that forwards every call to the
 * rank's real one after posting on the run board that the rank entered it (and
 * when). A rank that stops (SIGSTOP, a deadlock, an endless loop) stops entering
 * collectives while its peers wait inside one: the launcher's hang watch reads the
 * board and names the rank that is behind. */
#ifndef DDPD_TRAINER_COMM_WATCH_H
#define DDPD_TRAINER_COMM_WATCH_H

#include "collectives.h"
#include "run_board.h"

/* `slot`: the rank's slot on the board (its rank among its host's ranks). The
 * wrapper lives until process exit, like the comm it wraps. NULL on no memory. */
coll_comm *comm_watch_wrap(coll_comm *inner, run_board *board, int slot);

#endif
