/* An elastic run's ranks for a person: what `ddpctl show` prints of GET /runs/{id}'s
 * ranks_now and sizes (each change of size: when, from, to, why, for which run). */
#ifndef DDPD_CLIENT_SIZES_VIEW_H
#define DDPD_CLIENT_SIZES_VIEW_H

#include <jansson.h>
#include <stdio.h>

/* "  ranks:     2 of 4 (elastic, at least 2)" ("none held now, of 4" when it holds no
 * devices) and one line per change of size, for an
 * elastic run (distributed.min_world_size below world_size) or one that changed size;
 * nothing for any other. */
void sizes_print(const json_t *run, FILE *out);

#endif
