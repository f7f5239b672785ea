/* The JSON views that more than one answer shows, computed in one place: a run's
 * progress (GET /runs/{id}, GET /runs, and the live feed's step events all say the
 * same thing about where a run is and how long it has left). Pure functions of the
 * facts given: they read nothing themselves. */
#ifndef DDPD_SERVER_LIB_VIEWS_H
#define DDPD_SERVER_LIB_VIEWS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int64_t epoch, epochs, step, global_step, total_steps; /* NO_INT when unknown */
    int64_t first_global_step, first_step_at, last_step_at; /* the rate: first step seen to the latest */
    double loss, lr, samples_per_s;                         /* NaN when unknown */
    bool succeeded; /* a succeeded run is done: fraction 1, eta 0 */
    bool live;      /* starting or running: an ETA is meaningful */
} progress_facts;

/* {"epoch", "epochs", "step", "global_step", "total_steps", "fraction", "eta_s",
 *  "loss", "lr", "samples_per_s"}. global_step counts the steps done; the rate is
 * measured over the steps seen so far, so it includes evaluation pauses once a run
 * is past its first epoch. */
json_t *view_progress(const progress_facts *p);

#endif
