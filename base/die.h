/* Ending a command line program on an error of how it was started (a wrong flag, a
 * setting out of range, a directory it cannot use), before it runs anything:
 * "ddpd: what is wrong" on stderr, exit status 2. A program of its own (a
 * subcommand with its own name) says so once with die_set_program. */
#ifndef DDPD_BASE_DIE_H
#define DDPD_BASE_DIE_H

void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* The name before the message: "ddpd" unless set ("ddpd agent"). */
void die_set_program(const char *name);
const char *die_program(void);

#endif
