/* `ddpd man`: the ddpd(1) manual page, in roff, written from the very tables and usage
 * texts --help prints (serve's and check's settings, `ddpd user`'s, the agent's and a
 * Slurm node's part's), so that the page and the program cannot drift. The build
 * turns it into ddpd.1, which `cmake --install` puts in share/man/man1. */
#ifndef DDPD_SERVER_CMD_MAN_PAGE_H
#define DDPD_SERVER_CMD_MAN_PAGE_H

#include <stdio.h>

void man_page_write(FILE *out);

#endif
