/* `ddpd node`: lists the nodes marked suspect or excluded, and clears one (an
 * admin's command on the state directory, as `ddpd user` is), whether the server
 * runs or not (docs/failures.md). */
#ifndef DDPD_SERVER_CMD_NODE_CMD_H
#define DDPD_SERVER_CMD_NODE_CMD_H

/* argv[1] is "node". Returns the exit status: 0 done, 1 refused, 2 a mistake on the
 * command line. */
int node_main(int argc, char **argv);

extern const char NODE_USAGE[];

#endif
