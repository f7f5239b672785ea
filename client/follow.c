/* Following a run: events in, a progress bar or plain lines out. See follow.h. */
#include "follow.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "attempts_view.h"
#include "client_http.h"
#include "format.h"
#include "sse_reader.h"
#include "monotonic.h"

#define PLAIN_EVERY_S 10.0 /* plain progress lines, at most this often */
#define IDLE_S 60L /* ddpd sends a heartbeat comment every 15 s */

typedef struct {
    int64_t id;
    bool tty;
    int64_t last_event_id;
    bool bar_shown;
    double last_plain;
    json_t *progress; /* the newest step event */
    int result;       /* -1 until the run ends */
    bool heard;       /* an event came on this connection */
    size_t resumes_left; /* a resumed run: its resumes still to come in the replay; what came before the
                            last one is an earlier attempt's (its end is not this one's) */
} follower;

static const char *str_or_empty(const char *s) { return s ? s : ""; }

static int term_cols(void) {
    struct winsize w;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col >= 40) return w.ws_col;
    return 100;
}

static void clear_bar(follower *f) {
    if (f->tty && f->bar_shown) {
        fputs("\r\033[K", stdout);
        f->bar_shown = false;
    }
}

/* "epoch 2 (3 of 10) [#####-----]  34%  step 120/469  loss 0.4123  lr 1.00e-03  12,345 samples/s  ETA 1m23s" */
static void progress_line(const json_t *p, bool with_bar, int cols, char *out, size_t outlen) {
    json_int_t epoch = json_integer_value(json_object_get(p, "epoch"));
    json_int_t epochs = json_integer_value(json_object_get(p, "epochs"));
    json_int_t step = json_integer_value(json_object_get(p, "step"));
    json_int_t spe = json_integer_value(json_object_get(p, "steps_per_epoch"));
    double fraction = json_is_number(json_object_get(p, "fraction")) ? json_number_value(json_object_get(p, "fraction")) : NAN;
    char loss[32], lr[32], sps[32], eta[32], bar[64] = "";
    fmt_num(json_object_get(p, "loss"), loss, sizeof loss);
    fmt_sci(json_object_get(p, "lr"), lr, sizeof lr);
    fmt_thousands(json_object_get(p, "samples_per_s"), sps, sizeof sps);
    fmt_duration(json_is_number(json_object_get(p, "eta_s")) ? json_number_value(json_object_get(p, "eta_s")) : NAN, eta,
                 sizeof eta);
    char ep[64] = "", st[48] = "";
    if (epochs > 0) {
        fmt_epoch(epoch, epochs, ep, sizeof ep - 1);
        strcat(ep, " ");
    }
    if (spe > 0) snprintf(st, sizeof st, "step %lld/%lld  ", (long long)step + 1, (long long)spe);
    char rest[256];
    snprintf(rest, sizeof rest, "%sloss %s  lr %s  %s samples/s  ETA %s", st, loss, lr, sps, eta);
    /* the bar takes what the terminal has left, from 24 cells down to 6 (or none) */
    int width = 0;
    if (with_bar && isfinite(fraction)) {
        int room = cols - 1 - (int)strlen(ep) - (int)strlen(rest) - (int)strlen("[] 100%  ");
        width = room >= 24 ? 24 : room >= 6 ? room : 0;
    }
    if (width > 0) {
        int filled = (int)lround(fraction * width);
        char *b = bar;
        *b++ = '[';
        for (int i = 0; i < width; i++) *b++ = i < filled ? '#' : '-';
        snprintf(b, sizeof bar - (size_t)(b - bar), "] %3d%%  ", (int)lround(fraction * 100));
    } else if (isfinite(fraction)) {
        snprintf(bar, sizeof bar, "%d%%  ", (int)lround(fraction * 100));
    }
    snprintf(out, outlen, "%s%s%s", ep, bar, rest);
    if (with_bar && (int)strlen(out) >= cols) out[cols - 1] = '\0';
}

static void draw(follower *f) {
    if (!f->progress) return;
    char line[512];
    if (f->tty) {
        progress_line(f->progress, true, term_cols(), line, sizeof line);
        printf("\r\033[K%s", line);
        f->bar_shown = true;
        fflush(stdout);
    } else if (mono_s() - f->last_plain >= PLAIN_EVERY_S) {
        progress_line(f->progress, false, 1000, line, sizeof line);
        printf("%s\n", line);
        fflush(stdout);
        f->last_plain = mono_s();
    }
}

/* A line above the bar. */
static void say(follower *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(follower *f, const char *fmt, ...) {
    clear_bar(f);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    if (f->tty) draw(f);
    fflush(stdout);
}

static int terminal_result(const char *status) {
    if (strcmp(status, "succeeded") == 0) return EXIT_OK;
    if (strcmp(status, "failed") == 0) return EXIT_RUN_FAILED;
    /* stopped: a sweep's searcher ended it early, as a cancel would */
    if (strcmp(status, "canceled") == 0 || strcmp(status, "stopped") == 0 || strcmp(status, "timeout") == 0)
        return EXIT_RUN_CANCELED;
    return -1;
}

static int on_event(void *cls, const char *event, const char *id, const char *data) {
    follower *f = cls;
    f->heard = true;
    if (id) f->last_event_id = atoll(id);
    json_t *d = json_loads(data, 0, NULL);
    if (!d) return 0;
    if (f->resumes_left) { /* an earlier attempt's events: passed over */
        if (strcmp(event, "run") == 0 && json_object_get(d, "resumed")) f->resumes_left--;
        json_decref(d);
        return 0;
    }
    if (strcmp(event, "run") == 0) {
        const char *status = json_string_value(json_object_get(d, "status"));
        if (!status) status = "?";
        const char *reason = json_string_value(json_object_get(d, "reason"));
        json_t *devices = json_object_get(d, "devices");
        if (strcmp(status, "starting") == 0 && json_array_size(devices)) {
            char list[256] = "";
            size_t i;
            json_t *v;
            json_array_foreach(devices, i, v) {
                size_t used = strlen(list);
                snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", json_string_value(v));
            }
            say(f, "run %lld starting on %s", (long long)f->id, list);
        } else if (json_is_object(json_object_get(d, "restarting"))) { /* the server starts its next attempt */
            const json_t *again = json_object_get(d, "restarting");
            say(f, "run %lld %s again, to start attempt %lld: %s", (long long)f->id, status,
                (long long)json_integer_value(json_object_get(again, "attempt")),
                str_or_empty(json_string_value(json_object_get(again, "reason"))));
        } else if (strcmp(status, "queued") == 0 && json_integer_value(json_object_get(d, "preempted_by")) > 0) {
            say(f, "run %lld preempted by run %lld: queued again, it goes on once placed", (long long)f->id,
                (long long)json_integer_value(json_object_get(d, "preempted_by")));
        } else if (terminal_result(status) < 0) {
            say(f, "run %lld %s", (long long)f->id, status);
        }
        int r = terminal_result(status);
        if (r >= 0) {
            if (f->tty) draw(f); /* the last progress, then the end on its own line */
            clear_bar(f);
            f->result = r;
            (void)reason; /* the summary prints it */
            json_decref(d);
            return 1;
        }
    } else if (strcmp(event, "step") == 0) {
        json_decref(f->progress);
        f->progress = json_incref(d);
        draw(f);
    } else if (strcmp(event, "epoch") == 0) {
        char tl[32], vl[32], lr[32], acc[32] = "—", secs[32];
        fmt_num(json_object_get(d, "train_loss"), tl, sizeof tl);
        fmt_num(json_object_get(d, "test_loss"), vl, sizeof vl);
        fmt_sci(json_object_get(d, "lr"), lr, sizeof lr);
        json_t *a = json_object_get(d, "test_acc");
        if (json_is_number(a)) snprintf(acc, sizeof acc, "%.1f%%", json_number_value(a) * 100);
        fmt_num(json_object_get(d, "seconds"), secs, sizeof secs);
        if (!json_is_integer(json_object_get(f->progress, "epochs"))) {
            /* A replay (the run went ahead of us): the coalesced progress that tells the
             * epoch count may not have come; the run's record has it from the hello. */
            char path[64];
            int ec = 0;
            snprintf(path, sizeof path, "/runs/%lld", (long long)f->id);
            json_t *run = get_json(path, &ec);
            json_t *p = json_object_get(run, "progress");
            if (json_is_integer(json_object_get(p, "epochs"))) {
                json_decref(f->progress);
                f->progress = json_incref(p);
            }
            json_decref(run);
        }
        char ep[64];
        fmt_epoch(json_integer_value(json_object_get(d, "epoch")), json_integer_value(json_object_get(f->progress, "epochs")),
                  ep, sizeof ep);
        say(f, "%s done in %s s: train loss %s, test loss %s, test accuracy %s, lr %s", ep, secs, tl, vl, acc, lr);
    } else if (strcmp(event, "rank") == 0) {
        const char *state = json_string_value(json_object_get(d, "state"));
        const char *detail = json_string_value(json_object_get(d, "detail"));
        if (state && strcmp(state, "failed") == 0)
            say(f, "rank %lld failed%s%s", (long long)json_integer_value(json_object_get(d, "rank")),
                detail && *detail ? ": " : "", detail ? detail : "");
    } else if (strcmp(event, "attempt") == 0) {
        char line[2400];
        attempts_describe_event(d, line, sizeof line);
        if (line[0]) say(f, "%s", line);
    } else if (strcmp(event, "deleted") == 0) {
        clear_bar(f);
        fprintf(stderr, "ddpctl: run %lld was deleted\n", (long long)f->id);
        f->result = EXIT_REFUSED;
        json_decref(d);
        return 1;
    }
    json_decref(d);
    return 0;
}

/* The last word: how it ended, and why when it did not succeed. */
static void summary(follower *f) {
    char path[64];
    snprintf(path, sizeof path, "/runs/%lld", (long long)f->id);
    int ec = 0;
    json_t *run = get_json(path, &ec);
    if (!run) return;
    const char *status = json_string_value(json_object_get(run, "status"));
    const char *reason = json_string_value(json_object_get(run, "reason"));
    char took[112] = "";
    if (json_string_value(json_object_get(run, "started_at"))) {
        char d[96];
        attempts_took(run, d, sizeof d); /* every attempt's time, not only the last's */
        snprintf(took, sizeof took, " in %s", d);
    }
    if (status && strcmp(status, "succeeded") == 0) {
        snprintf(path, sizeof path, "/runs/%lld/epochs", (long long)f->id);
        json_t *ep = get_json(path, &ec);
        json_t *last = json_array_get(json_object_get(ep, "epochs"), json_array_size(json_object_get(ep, "epochs")) - 1);
        json_t *acc = json_object_get(last, "test_acc");
        if (json_is_number(acc))
            printf("run %lld succeeded%s: test accuracy %.1f%% after %lld epoch%s\n", (long long)f->id, took,
                   json_number_value(acc) * 100, (long long)json_integer_value(json_object_get(last, "epoch")) + 1,
                   json_integer_value(json_object_get(last, "epoch")) ? "s" : "");
        else
            printf("run %lld succeeded%s\n", (long long)f->id, took);
        json_decref(ep);
    } else {
        printf("run %lld %s%s%s%s\n", (long long)f->id, status && strcmp(status, "canceled") == 0 ? "was canceled" : status,
               took, reason ? ": " : "", reason ? reason : "");
    }
    fflush(stdout);
    json_decref(run);
}

static void clear_bar_of(void *f) { clear_bar(f); }

int follow_run(int64_t id, bool tty) {
    follower f = {.id = id, .tty = tty, .last_event_id = 0, .result = -1, .last_plain = -1e9};
    char path[64], err[1024];
    snprintf(path, sizeof path, "/runs/%lld", (long long)id);
    int ec = 0;
    json_t *now = get_json(path, &ec); /* a resumed run is followed from its last resume */
    f.resumes_left = json_array_size(json_object_get(now, "resumes"));
    json_decref(now);
    snprintf(path, sizeof path, "/runs/%lld/events", (long long)id);
    sse_retry retry = {.before_saying = clear_bar_of, .cls = &f};
    for (;;) {
        long status = 0;
        f.heard = false;
        int rc = sse_read(path, f.last_event_id, IDLE_S, on_event, &f, &status, err, sizeof err);
        if (f.result >= 0) break;
        if (client_interrupted()) {
            clear_bar(&f);
            fprintf(stderr, "\nddpctl: stopped following; run %lld goes on (ddpctl cancel %lld stops it)\n",
                    (long long)id, (long long)id);
            json_decref(f.progress);
            return EXIT_INTERRUPTED;
        }
        /* refused; else broken, ended (the server stopped) or 503 (it is stopping): resume
         * where the stream left off, for up to a minute from the break */
        int verdict = sse_retry_after(&retry, rc, status, f.heard, err);
        if (verdict != SSE_RETRY) {
            json_decref(f.progress);
            return verdict == SSE_GIVE_UP_REFUSED ? EXIT_REFUSED : EXIT_UNREACHABLE;
        }
    }
    json_decref(f.progress);
    summary(&f);
    return f.result;
}
