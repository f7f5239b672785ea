/* The base layer in one include: allocation that cannot fail, growable buffers,
 * clocks and times, missing values in JSON, and the one logging API (with its
 * once-per-interval limiter). Every layer above may use it; it uses nothing of
 * theirs. */
#ifndef DDPD_SERVER_BASE_BASE_H
#define DDPD_SERVER_BASE_BASE_H

#include "alloc.h"
#include "buf.h"
#include "clock.h"
#include "json_values.h"
#include "log_limit.h"
#include "server_log.h"

#endif
