/* A run's per-epoch series (what a script reports with ddpd.log_epoch beyond the
 * epoch table's columns: the series "epoch:NAME", its step the epoch) for `ddpctl
 * show`'s epochs table: one column each. */
#ifndef DDPD_CLIENT_EPOCH_SERIES_H
#define DDPD_CLIENT_EPOCH_SERIES_H

#include <jansson.h>

/* {"NAME": {"EPOCH": value, ...}, ...} of run `id` (GET /runs/{id}/metrics), at most
 * EPOCH_SERIES_SHOWN of them; an empty object when it has none or they cannot be read. */
#define EPOCH_SERIES_SHOWN 6
json_t *epoch_series_get(long long id);

/* Series `name`'s value at `epoch` as a cell ("-" when none) into out. */
void epoch_series_cell(const json_t *series, const char *name, long long epoch, char *out, size_t n);

#endif
