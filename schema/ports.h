/* TCP ports for command runs' MASTER_PORT: the range ddpd leases them from
 * (--port-range LO-HI, which ddpd serve takes and hands on to ddp-run) and whether a
 * port is free on this host right now. Shared by the server, which leases a port
 * for a run, and ddp-run, which picks another one from the same range when a
 * restart finds the run's own taken. */
#ifndef DDPD_SCHEMA_PORTS_H
#define DDPD_SCHEMA_PORTS_H

#include <stdbool.h>
#include <stddef.h>

/* "29600-29999" -> 29600, 29999. -1 with a sentence in err for anything else (both
 * in 1..65535, lo <= hi; torchrun's defaults 29500 and 29400 are refused inside it). */
int port_range_parse(const char *text, int *lo, int *hi, char *err, size_t errlen);

/* Whether a TCP socket can bind `port` on every address (0.0.0.0) now: nothing
 * listens there and nothing holds it, not even a connection in TIME_WAIT. */
bool port_is_free(int port);

/* Whether a listener that sets SO_REUSEADDR, as PyTorch's TCPStore does, can bind
 * `port` on every address now. Unlike port_is_free, the TIME_WAIT connections a
 * killed listener leaves behind on its port (for a minute) do not count: a restarted
 * rank 0 can listen there again at once. */
bool port_is_listenable(int port);

/* A port the kernel picks among its ephemeral ones that port_is_listenable now; 0
 * when it cannot say. */
int port_any_listenable(void);

/* The first port after `after` in lo..hi, round the range (`after` itself last),
 * that port_is_listenable; 0 when none is. */
int port_next_listenable(int lo, int hi, int after);

#endif
