/* `ddpd part`: what a Slurm job runs on each of its nodes (one srun task per node,
 * started by the job's script that ddpd serve --executor slurm writes): one node's
 * part of one run, run as an agent runs one (agent_parts.h: its launcher as the
 * server describes it, in its own process group; agent_streams.h: its event socket),
 * in the run directory WORK/ID/part-K on the node. About once a second it reports to
 * the server with the run's secret (POST /runs/{id}/parts): its events and logs, its
 * launcher's state; the answer says what to start, and whether to stop. Its node
 * rank, node count and node name are Slurm's (SLURM_NODEID, SLURM_JOB_NUM_NODES,
 * SLURMD_NODENAME); node 0 picks a command run's MASTER_PORT.
 *
 * A SIGTERM (scancel, or srun stopping the step when another node's part failed)
 * stops its launcher, which is reported with when it came. It keeps what the server
 * has not taken (a server that restarts gets it then) and ends once its launcher's
 * end is taken, with its launcher's exit status (srun --kill-on-bad-exit stops the
 * other nodes on a failure); or once the server says the run is no longer its. */
#ifndef DDPD_SERVER_AGENT_PART_H
#define DDPD_SERVER_AGENT_PART_H

/* argv[2..] are its options (`ddpd part --help`). Returns the exit status. */
#include "opt_table.h"

int part_main(int argc, char **argv);

/* Its settings (`ddpd part --help`, and `ddpd man`'s section on Slurm nodes). */
extern const opt_table PART_OPTIONS;

#endif
