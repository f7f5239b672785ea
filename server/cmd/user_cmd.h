/* `ddpd user`: adds, lists, re-tokens and removes the users of a shared server in its
 * state directory's database, whether the server runs or not (sched/include/users.h). */
#ifndef DDPD_SERVER_CMD_USER_CMD_H
#define DDPD_SERVER_CMD_USER_CMD_H

/* argv[1] is "user". Returns the exit status: 0 done, 1 refused (a user that exists,
 * one that does not, the database), 2 a mistake on the command line. */
int user_main(int argc, char **argv);

/* Its usage (`ddpd user --help`, and `ddpd man`'s USERS section). */
extern const char USER_USAGE[];

#endif
