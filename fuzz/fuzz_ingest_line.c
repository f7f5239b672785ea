/* libFuzzer harness: any bytes as what one trainer connection sends on the event
 * socket, through ingest's own line handling (server/feed/ingest.c, included here so
 * its static functions are the ones fuzzed): the split into lines, the JSON parse,
 * one event or an array, the hello and its secret, every event kind's parse
 * (event_kinds.c) and the ops they become, freed as the store would free them.
 *
 * The bytes go in twice, all at once and in small reads (as a socket may deliver
 * them): both must give the same ops, and neither may crash, leak or misbehave. A
 * hello opens the connection when it is for run 7 with the secret "s3cret" (the
 * seeds in fuzz/corpus/ingest_line do so). */
#include "../server/feed/ingest.c"

#define FUZZ_RUN 7
#define FUZZ_SECRET "s3cret"

static bool fuzz_hello(int64_t run_id, const char *secret, int rank, long peer_uid) {
    (void)peer_uid; /* the fuzzer's own: the account check is the scheduler's hook */
    return run_id == FUZZ_RUN && secret && strcmp(secret, FUZZ_SECRET) == 0 && rank >= -1;
}
static void fuzz_end(int64_t run_id, const char *status, const char *reason, long peer_pid, const char *launch) {
    if (run_id != FUZZ_RUN || !status || !launch) abort(); /* an end only from the connection's run, and its start */
    (void)reason;
    (void)peer_pid;
}
static void fuzz_progress(int64_t run_id, int rank, int64_t global_step) {
    if (run_id != FUZZ_RUN || rank < 0) abort();
    (void)global_step;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    server_log_config quiet = {.level = LOG_ERROR}; /* malformed lines are logged at warn */
    char err[256];
    if (server_log_setup(&quiet, err, sizeof err) != 0) abort();
    I.hooks = (ingest_hooks){.hello = fuzz_hello, .end = fuzz_end, .progress = fuzz_progress};
    return 0;
}

/* Feeds `data` to a fresh connection `chunk` bytes a read, then the end of stream;
 * the ops it queued are left in *ops. */
static void feed(const uint8_t *data, size_t n, size_t chunk, op_vec *ops) {
    conn c = {.fd = -1, .run_id = NO_INT, .rank = -2};
    c.cap = 2 * READ_CHUNK; /* as read_conn: the buffer exists before the first read */
    c.buf = xmalloc(c.cap);
    bool open = true;
    for (size_t at = 0; at < n && open; at += chunk) {
        size_t k = n - at < chunk ? n - at : chunk;
        if (c.cap - c.len < k) {
            c.cap = c.len + k + 64;
            c.buf = xrealloc(c.buf, c.cap);
        }
        memcpy(c.buf + c.len, data + at, k);
        c.len += k;
        open = consume_lines(&c, ops, false);
    }
    if (open) consume_lines(&c, ops, true);
    report_progress(ops);
    free(c.buf);
    /* a fresh server's memory of processes: the second feed is not this one reconnecting */
    catch_up_free_all();
    I.n_pending = 0;
}

static void free_ops(op_vec *ops) {
    for (size_t i = 0; i < ops->n; i++) store_op_free(&ops->v[i]);
    free(ops->v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    op_vec whole = {0}, pieces = {0};
    feed(data, n, n ? n : 1, &whole);
    feed(data, n, 1 + n % 13, &pieces);
    if (whole.n != pieces.n) abort(); /* how the bytes were read changed what they said */
    for (size_t i = 0; i < whole.n; i++) {
        const store_op *a = &whole.v[i], *b = &pieces.v[i];
        if (a->kind != b->kind || a->run_id != FUZZ_RUN || b->run_id != FUZZ_RUN || a->rank != b->rank ||
            a->kind >= OP_RUN_INSERT)
            abort();
    }
    free_ops(&whole);
    free_ops(&pieces);
    return 0;
}
