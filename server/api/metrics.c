/* The /metrics collector: see metrics.h. */
#include "metrics.h"

#include <stdint.h>

#include "base.h"
#include "conn_guard.h"
#include "ddpd_build_config.h"
#include "feed.h"
#include "ingest.h"
#include "prom.h"
#include "rendezvous.h"
#include "run_cache.h"
#include "run_status.h"
#include "scheduler.h"
#include "store.h"
#include "sse.h"
#include "store_read.h"

static double start_time_s;

__attribute__((constructor)) static void note_start_time(void) { start_time_s = (double)now_ms() / 1000.0; }

void metrics_render(buf_t *b) {
    prom_family(b, "ddpd_build_info", "gauge", "Always 1: the version of ddpd and whether it was built with the CUDA backend.");
    prom_sample_u(b, "ddpd_build_info",
                  (const char *[]){"version", DDPD_VERSION, "cuda", DDPD_HAVE_CUDA ? "yes" : "no", NULL}, 1);
    prom_family(b, "ddpd_start_time_seconds", "gauge", "When this ddpd process started, in unix seconds.");
    prom_sample_d(b, "ddpd_start_time_seconds", NULL, start_time_s);

    int64_t runs[RUN_STATUS_COUNT];
    if (store_count_by_status(runs) == 0) {
        prom_family(b, "ddpd_runs", "gauge", "Runs in the store, by status.");
        for (int i = 0; i < RUN_STATUS_COUNT; i++)
            prom_sample_u(b, "ddpd_runs", (const char *[]){"status", run_status_name((run_status)i), NULL},
                          (uint64_t)runs[i]);
    } else {
        log_warn("metrics: the store could not be read for ddpd_runs");
    }

    /* where the device time went (usage_ledger.h), per user and phase; goodput per user and for the box */
    json_t *usage = store_usage_json(NULL, NULL, "user");
    if (usage) {
        prom_family(b, "ddpd_device_seconds_total", "counter",
                    "Device seconds held by each user's runs, by phase (GET /usage; queue: wall seconds queued).");
        json_t *g, *v;
        size_t i;
        const char *phase;
        json_array_foreach(json_object_get(usage, "groups"), i, g) {
            const char *who = json_string_value(json_object_get(g, "user"));
            json_object_foreach(json_object_get(g, "phases"), phase, v)
                prom_sample_d(b, "ddpd_device_seconds_total", (const char *[]){"user", who ? who : "", "phase", phase, NULL},
                              json_real_value(v));
        }
        prom_family(b, "ddpd_goodput_ratio", "gauge",
                    "Productive device seconds over those held, per user (user \"\": nobody in particular) and for the box (no user label).");
        json_array_foreach(json_object_get(usage, "groups"), i, g) {
            const char *who = json_string_value(json_object_get(g, "user"));
            if (json_is_real(json_object_get(g, "goodput")))
                prom_sample_d(b, "ddpd_goodput_ratio", (const char *[]){"user", who ? who : "", NULL},
                              json_real_value(json_object_get(g, "goodput")));
        }
        json_t *box = json_object_get(usage, "box");
        if (json_is_real(json_object_get(box, "goodput")))
            prom_sample_d(b, "ddpd_goodput_ratio", NULL, json_real_value(json_object_get(box, "goodput")));
        json_decref(usage);
    } else {
        log_warn("metrics: the store could not be read for ddpd_device_seconds_total");
    }

    scheduler_snapshot s;
    scheduler_take_snapshot(&s);
    prom_family(b, "ddpd_queue_length", "gauge", "Runs queued, waiting for devices.");
    prom_sample_u(b, "ddpd_queue_length", NULL, (uint64_t)s.queued);
    prom_family(b, "ddpd_active_runs", "gauge", "Runs given devices and not finished (starting, running, canceling).");
    prom_sample_u(b, "ddpd_active_runs", NULL, (uint64_t)s.active);
    prom_family(b, "ddpd_devices", "gauge", "Devices this server manages, by kind (cpu: CPU slots, gpu: GPUs) and state.");
    prom_sample_u(b, "ddpd_devices", (const char *[]){"kind", "cpu", "state", "in_use", NULL},
                  (uint64_t)(s.cpu_slots - s.cpu_free));
    prom_sample_u(b, "ddpd_devices", (const char *[]){"kind", "cpu", "state", "free", NULL}, (uint64_t)s.cpu_free);
    prom_sample_u(b, "ddpd_devices", (const char *[]){"kind", "gpu", "state", "in_use", NULL},
                  (uint64_t)(s.gpus - s.gpu_free));
    prom_sample_u(b, "ddpd_devices", (const char *[]){"kind", "gpu", "state", "free", NULL}, (uint64_t)s.gpu_free);

    ingest_counters ing;
    ingest_take_counters(&ing);
    prom_family(b, "ddpd_ingest_events_total", "counter", "Events ingested from trainers over the event socket.");
    prom_sample_u(b, "ddpd_ingest_events_total", NULL, ing.events);
    prom_family(b, "ddpd_ingest_lines_total", "counter", "Lines read from the event socket (a line holds one event or an array).");
    prom_sample_u(b, "ddpd_ingest_lines_total", NULL, ing.lines);
    prom_family(b, "ddpd_ingest_malformed_lines_total", "counter", "Event lines skipped because they were not valid events.");
    prom_sample_u(b, "ddpd_ingest_malformed_lines_total", NULL, ing.malformed);
    prom_family(b, "ddpd_ingest_dropped_connections_total", "counter",
                "Event connections dropped (no hello, or the wrong secret).");
    prom_sample_u(b, "ddpd_ingest_dropped_connections_total", NULL, ing.dropped_connections);
    prom_family(b, "ddpd_ingest_connections", "gauge", "Trainer processes connected to the event socket now.");
    prom_sample_u(b, "ddpd_ingest_connections", NULL, ing.connections);
    prom_family(b, "ddpd_event_streams", "gauge", "Server-sent event streams open now (GET /events, /runs/{id}/events).");
    prom_sample_u(b, "ddpd_event_streams", NULL, (uint64_t)feed_subscribers());
    sse_counters sc;
    sse_take_counters(&sc);
    prom_family(b, "ddpd_event_streams_refused_total", "counter",
                "Event streams refused with 503, by the cap they were over (per_address: --max-streams-per-address, "
                "total: --max-streams).");
    prom_sample_u(b, "ddpd_event_streams_refused_total", (const char *[]){"cap", "per_address", NULL},
                  sc.refused_per_address);
    prom_sample_u(b, "ddpd_event_streams_refused_total", (const char *[]){"cap", "total", NULL}, sc.refused_total);

    conn_guard_counters cg;
    conn_guard_take_counters(&cg);
    prom_family(b, "ddpd_http_connections", "gauge", "HTTP connections open now.");
    prom_sample_u(b, "ddpd_http_connections", NULL, cg.open);
    prom_family(b, "ddpd_http_client_addresses", "gauge", "Client addresses holding HTTP connections now.");
    prom_sample_u(b, "ddpd_http_client_addresses", NULL, cg.addresses);
    prom_family(b, "ddpd_http_connections_refused_total", "counter",
                "HTTP connections turned away at accept (a 503), by why: per_address (--max-connections-per-address), "
                "total (--max-connections and the loopback reserve), no_fds (the process was out of file "
                "descriptors).");
    prom_sample_u(b, "ddpd_http_connections_refused_total", (const char *[]){"reason", "per_address", NULL},
                  cg.refused_per_address);
    prom_sample_u(b, "ddpd_http_connections_refused_total", (const char *[]){"reason", "total", NULL},
                  cg.refused_total);
    prom_sample_u(b, "ddpd_http_connections_refused_total", (const char *[]){"reason", "no_fds", NULL},
                  cg.refused_no_fds);
    prom_family(b, "ddpd_http_header_timeouts_total", "counter",
                "HTTP connections closed for not sending a request's headers within --header-timeout.");
    prom_sample_u(b, "ddpd_http_header_timeouts_total", NULL, cg.header_timeouts);

    store_health sh;
    store_health_take(&sh);
    prom_family(b, "ddpd_store_writable", "gauge",
                "1 while the store's writer can write to the database; 0 while a batch it cannot commit (a full disk,"
                " an I/O error) is kept and retried (GET /healthz says why, with 503).");
    prom_sample_u(b, "ddpd_store_writable", NULL, sh.writable ? 1 : 0);
    prom_family(b, "ddpd_store_pending_writes", "gauge",
                "Writes (events, run changes) queued or kept by the store's writer and not yet committed.");
    prom_sample_u(b, "ddpd_store_pending_writes", NULL, sh.pending);
    prom_family(b, "ddpd_store_unwritable_seconds", "gauge",
                "How long the database has not been writable, in seconds; 0 while it is.");
    prom_sample_d(b, "ddpd_store_unwritable_seconds", NULL,
                  sh.writable ? 0.0 : (double)(now_ms() - sh.since_ms) / 1000.0);
    prom_family(b, "ddpd_store_refused_writes_total", "counter",
                "Writes a caller waited for and was told failed because the database could not be written (a new run,"
                " a deletion): nothing of them was kept.");
    prom_sample_u(b, "ddpd_store_refused_writes_total", NULL, sh.refused_total);

    run_cache_stats rc;
    run_cache_take_stats(&rc);
    prom_family(b, "ddpd_run_answers_total", "counter",
                "GET /runs/{id} answers (200 or 304), by where they came from: the cache (the run unchanged since"
                " its answer was built) or built from the store.");
    prom_sample_u(b, "ddpd_run_answers_total", (const char *[]){"source", "cache", NULL}, rc.served);
    prom_sample_u(b, "ddpd_run_answers_total", (const char *[]){"source", "built", NULL}, rc.built);
    prom_family(b, "ddpd_run_cache_runs", "gauge", "Runs whose GET /runs/{id} answer is cached now.");
    prom_sample_u(b, "ddpd_run_cache_runs", NULL, rc.runs);
    prom_family(b, "ddpd_run_cache_bytes", "gauge", "Bytes of cached GET /runs/{id} answers now.");
    prom_sample_u(b, "ddpd_run_cache_bytes", NULL, rc.bytes);

    uint64_t decided[3];
    scheduler_queue_decisions(decided);
    prom_family(b, "ddpd_queue_decisions_total", "counter",
                "Times the queue policy decided the whole queue, by cause: a change (a submission, an end, a cancel),"
                " a read that found a change not decided yet, or the tick (submissions it coalesced, and once a"
                " second as time moves). Reads of a decided queue add nothing.");
    prom_sample_u(b, "ddpd_queue_decisions_total", (const char *[]){"cause", "change", NULL}, decided[0]);
    prom_sample_u(b, "ddpd_queue_decisions_total", (const char *[]){"cause", "read", NULL}, decided[1]);
    prom_sample_u(b, "ddpd_queue_decisions_total", (const char *[]){"cause", "tick", NULL}, decided[2]);
    uint64_t to_inbox, lock_reads;
    scheduler_queue_lock_stats(&to_inbox, &lock_reads);
    prom_family(b, "ddpd_queue_submissions_deferred_total", "counter",
                "Submissions behind a long queue that came while a decision held the scheduler's lock: answered at"
                " once, put in the queue by the next holder of the lock rather than waiting for it.");
    prom_sample_u(b, "ddpd_queue_submissions_deferred_total", NULL, to_inbox);
    prom_family(b, "ddpd_queue_locked_reads_total", "counter",
                "Reads of the queue or of a queued run that took the scheduler's lock (a change waited to be decided,"
                " or the run was not among those last published). Reads of a decided queue add nothing.");
    prom_sample_u(b, "ddpd_queue_locked_reads_total", NULL, lock_reads);

    rendezvous_stats rv;
    rendezvous_take_stats(&rv);
    prom_family(b, "ddpd_rendezvous_keys", "gauge",
                "Keys the active runs' rendezvous hold now (what their processes exchange through POST"
                " /runs/{id}/rendezvous); a run's go when it finishes.");
    prom_sample_u(b, "ddpd_rendezvous_keys", NULL, rv.keys);
    prom_family(b, "ddpd_rendezvous_bytes", "gauge", "Bytes of the keys and values the active runs' rendezvous hold now.");
    prom_sample_u(b, "ddpd_rendezvous_bytes", NULL, rv.bytes);

    metrics_sink_render(b);
}

void metrics_handle(request *rq, response *rs) {
    (void)rq;
    buf_t b = {0};
    metrics_render(&b);
    reply_text(rs, 200, b.data, b.len, "text/plain; version=0.0.4; charset=utf-8");
}
