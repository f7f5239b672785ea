/* The API's routes: the table the router serves, and what the handlers need to
 * know about the server. */
#ifndef DDPD_ROUTES_H
#define DDPD_ROUTES_H

#include <stddef.h>

#include "datapaths.h"
#include "http.h"

typedef struct {
    const data_roots *roots;
    const char *runs_dir;           /* <state dir>/runs */
    const data_roots *runs_root;    /* runs_dir as a root: where checkpoint.load may point */
} routes_config;

void routes_init(const routes_config *c);
extern const route api_routes[];
extern const size_t api_routes_count;

#endif
