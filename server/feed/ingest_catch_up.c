/* Ingest's catch-up after a dropped connection: see ingest_catch_up.h. */
#include "ingest_catch_up.h"

#include <stdlib.h>

#include "base.h"
#include "event_kinds.h"
#include "journal_replay.h"
#include "state_layout.h"

struct catch_up_process {
    int64_t run_id;
    journal_process id;         /* rank, pid, hello t and seq; after_seq unused here */
    int64_t received;           /* the newest seq received from a socket, NO_INT when none */
    int64_t replayed_through;   /* the newest seq a replay stored, NO_INT when none */
    struct catch_up_process *next;
};

static struct {
    catch_up_hooks hooks;
    catch_up_process *all;
} U;

void catch_up_init(const catch_up_hooks *hooks) { U.hooks = hooks ? *hooks : (catch_up_hooks){0}; }

static void on_progress(void *ctx, int rank, int64_t global_step) {
    const catch_up_process *p = ctx;
    if (U.hooks.progress) U.hooks.progress(p->run_id, rank, global_step);
}

static void on_attempt(void *ctx, store_op *op) {
    (void)ctx;
    if (U.hooks.attempt) (void)U.hooks.attempt(op, 0, NULL); /* the journal's word, as its end's */
}

/* A replayed point counts against the run's cap as one from the socket does. */
static bool on_keep(void *ctx, const store_op *op) {
    (void)ctx;
    return !U.hooks.keep || U.hooks.keep(op);
}

/* What one catch-up reads of a journal at most (its events are about 100 bytes: a
 * million of them), whatever the journal holds. */
#define CATCH_UP_MAX_BYTES ((int64_t)128 << 20)

/* The newest of a process's seqs, stored either way. */
static int64_t stored_through(const catch_up_process *p) {
    if (p->received == NO_INT) return p->replayed_through;
    if (p->replayed_through == NO_INT) return p->received;
    return p->received > p->replayed_through ? p->received : p->replayed_through;
}

/* The journal's events of p after what it stored, queued now. */
static void replay_missed(catch_up_process *p) {
    char *dir = layout_run_dir(p->run_id);
    journal_process want = p->id;
    want.after_seq = stored_through(p);
    journal_replay *j = journal_replay_open_process(p->run_id, dir, &want,
                                                    &(journal_hooks){.ctx = p, .progress = on_progress,
                                                                     .attempt = on_attempt, .keep = on_keep});
    /* on the ingest thread: bounded, so that one run's journal cannot hold every run's events */
    journal_replay_read(j, false, CATCH_UP_MAX_BYTES);
    const journal_outcome *o = journal_replay_outcome(j);
    if (o->last_seq != NO_INT) {
        p->replayed_through = o->last_seq;
        log_info("run %lld: rank %d reconnected to the event socket: %lld event(s) it journaled meanwhile were taken "
                 "from its journal (through seq %lld)", (long long)p->run_id, p->id.rank, (long long)o->replayed,
                 (long long)o->last_seq);
    }
    if (o->ended && U.hooks.end) U.hooks.end(p->run_id, o->status, o->reason, 0, NULL);
    journal_replay_close(j);
    free(dir);
}

catch_up_process *catch_up_hello(int64_t run_id, int rank, const json_t *hello, bool *again) {
    journal_process id = {.rank = rank, .pid = event_int(hello, "pid"), .hello_t = event_int(hello, "t"),
                          .hello_seq = event_int(hello, "seq"), .after_seq = NO_INT};
    for (catch_up_process *p = U.all; p; p = p->next) {
        if (p->run_id != run_id || p->id.rank != rank || p->id.pid != id.pid || p->id.hello_t != id.hello_t ||
            p->id.hello_seq != id.hello_seq)
            continue;
        replay_missed(p); /* its hello again: a reconnection */
        *again = true;
        return p;
    }
    catch_up_process *p = xcalloc(1, sizeof *p);
    p->run_id = run_id;
    p->id = id;
    p->received = id.hello_seq; /* the events after it are the ones to come */
    p->replayed_through = NO_INT;
    *again = false;
    p->next = U.all;
    U.all = p;
    return p;
}

bool catch_up_take(catch_up_process *p, const json_t *ev) {
    int64_t seq = event_int(ev, "seq");
    if (!p || seq == NO_INT) return true;
    if (p->replayed_through != NO_INT && seq <= p->replayed_through) return false;
    if (p->received == NO_INT || seq > p->received) p->received = seq;
    return true;
}

void catch_up_run_ended(int64_t run_id) {
    for (catch_up_process **pp = &U.all; *pp;) {
        catch_up_process *p = *pp;
        if (p->run_id == run_id) {
            *pp = p->next;
            free(p);
        } else {
            pp = &p->next;
        }
    }
}

void catch_up_free_all(void) {
    while (U.all) {
        catch_up_process *p = U.all;
        U.all = p->next;
        free(p);
    }
}
