/* Run ids as they appear in paths and events: the one parser, so that "/runs/12",
 * the event socket's "run": "12" and every other place agree on what an id is. */
#ifndef DDPD_SERVER_LIB_IDS_H
#define DDPD_SERVER_LIB_IDS_H

#include <stdbool.h>
#include <stdint.h>

/* A positive decimal integer with nothing else around it (no sign, no spaces, no
 * leading zeros): one spelling per id. */
bool parse_run_id(const char *text, int64_t *out);

#endif
