/* Shared JSON views: see views.h. */
#include "views.h"

#include <math.h>

#include "json_values.h"

json_t *view_progress(const progress_facts *p) {
    double fraction = NAN, eta = NAN;
    if (p->succeeded) {
        fraction = 1.0;
        eta = 0.0;
    } else if (p->total_steps != NO_INT && p->total_steps > 0 && p->global_step != NO_INT) {
        fraction = (double)p->global_step / (double)p->total_steps;
        if (fraction > 1.0) fraction = 1.0;
        if (p->live && p->first_global_step != NO_INT && p->global_step > p->first_global_step &&
            p->last_step_at > p->first_step_at) {
            double steps_per_s =
                (double)(p->global_step - p->first_global_step) * 1000.0 / (double)(p->last_step_at - p->first_step_at);
            double left = (double)(p->total_steps - p->global_step);
            eta = left > 0 ? left / steps_per_s : 0.0;
        }
    }
    json_t *o = json_object();
    json_object_set_new(o, "epoch", json_int_or_null(p->epoch));
    json_object_set_new(o, "epochs", json_int_or_null(p->epochs));
    json_object_set_new(o, "step", json_int_or_null(p->step));
    json_object_set_new(o, "global_step", json_int_or_null(p->global_step));
    json_object_set_new(o, "total_steps", json_int_or_null(p->total_steps));
    json_object_set_new(o, "fraction", json_real_or_null(fraction));
    json_object_set_new(o, "eta_s", json_real_or_null(eta));
    json_object_set_new(o, "loss", json_real_or_null(p->loss));
    json_object_set_new(o, "lr", json_real_or_null(p->lr));
    json_object_set_new(o, "samples_per_s", json_real_or_null(p->samples_per_s));
    return o;
}
