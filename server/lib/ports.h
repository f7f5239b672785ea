/* TCP ports for command runs' MASTER_PORT: the range ddpd leases them from
 * (--port-range LO-HI) and whether a port is free on this host right now. */
#ifndef DDPD_LIB_PORTS_H
#define DDPD_LIB_PORTS_H

#include <stdbool.h>
#include <stddef.h>

/* "29600-29999" -> 29600, 29999. -1 with a sentence in err for anything else (both
 * in 1..65535, lo <= hi; torchrun's defaults 29500 and 29400 are refused inside it). */
int port_range_parse(const char *text, int *lo, int *hi, char *err, size_t errlen);

/* Whether a TCP socket can bind `port` on every address (0.0.0.0) now: nothing
 * listens there and nothing holds it. */
bool port_is_free(int port);

#endif
