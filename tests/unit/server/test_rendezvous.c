/* Unit tests of server/exec/rendezvous.c: the key and value rules at their bounds;
 * every one of 4096 keys read back after the table has grown many times, then the
 * cap; write-once (the same value, another value, another of the same length); the
 * secret (another run's, a prefix, none, an empty held secret); close frees (the
 * stats), open again starts empty under the new secret; and writers on several
 * threads at once, each key kept once with its own value. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rendezvous.h"

#define S1 "1111111111111111111111111111111111111111111111111111111111111111"
#define S2 "2222222222222222222222222222222222222222222222222222222222222222"

static rendezvous_result put(int64_t run, const char *secret, const char *key, const char *value) {
    return rendezvous_put(run, secret, key, strlen(key), value, strlen(value));
}

/* The value of `key` in `run`, or NULL (with the result in *res); malloc'd. */
static char *get(int64_t run, const char *secret, const char *key, rendezvous_result *res) {
    char *v;
    size_t n;
    *res = rendezvous_get(run, secret, key, strlen(key), &v, &n);
    if (v && strlen(v) != n) CHECK(0, "the length given is the value's: %zu vs %zu", n, strlen(v));
    return v;
}

static void rules(void) {
    char key[RENDEZVOUS_KEY_MAX + 2];
    memset(key, 'k', sizeof key);
    CHECK(rendezvous_key_ok(key, RENDEZVOUS_KEY_MAX) && !rendezvous_key_ok(key, RENDEZVOUS_KEY_MAX + 1),
          "a key of 200 characters, not 201");
    CHECK(rendezvous_key_ok("Az09._:/-", 9), "every allowed kind of character");
    const char *bad[] = {"", "a b", "a?b", "a%b", "a\\b", "a\"b", "\xd0\xba", "a\nb"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!rendezvous_key_ok(bad[i], strlen(bad[i])), "key %zu refused", i);
    CHECK(!rendezvous_key_ok("a\0b", 3), "a NUL inside a key is refused");
    CHECK(!rendezvous_key_ok(NULL, 0), "no key");

    CHECK(rendezvous_value_ok("", 0) && rendezvous_value_ok("0123456789abcdef", 16), "empty, and every hex digit");
    CHECK(!rendezvous_value_ok("abc", 3), "an odd number of digits");
    CHECK(!rendezvous_value_ok("AB", 2) && !rendezvous_value_ok("0g", 2) && !rendezvous_value_ok("0\0", 2),
          "uppercase, not hex, NUL");
    char *v = malloc(RENDEZVOUS_VALUE_MAX + 2);
    memset(v, 'a', RENDEZVOUS_VALUE_MAX + 2);
    CHECK(rendezvous_value_ok(v, RENDEZVOUS_VALUE_MAX) && !rendezvous_value_ok(v, RENDEZVOUS_VALUE_MAX + 2),
          "131072 digits, not 131074");
    free(v);
}

static void many_keys(void) {
    rendezvous_open(1, S1);
    char key[32], value[32];
    int created = 0;
    for (int i = 0; i < RENDEZVOUS_KEYS_MAX; i++) {
        snprintf(key, sizeof key, "rank/%d", i);
        snprintf(value, sizeof value, "%08x", (unsigned)i * 2654435761u);
        created += put(1, S1, key, value) == RDV_CREATED;
    }
    CHECK(created == RENDEZVOUS_KEYS_MAX, "4096 keys created: %d", created);
    int right = 0;
    for (int i = 0; i < RENDEZVOUS_KEYS_MAX; i++) {
        snprintf(key, sizeof key, "rank/%d", i);
        snprintf(value, sizeof value, "%08x", (unsigned)i * 2654435761u);
        rendezvous_result res;
        char *got = get(1, S1, key, &res);
        right += res == RDV_FOUND && got && strcmp(got, value) == 0;
        free(got);
    }
    CHECK(right == RENDEZVOUS_KEYS_MAX, "every key reads back its own value after the table grew: %d", right);
    CHECK(put(1, S1, "one/more", "00") == RDV_FULL, "the 4097th key: full");
    snprintf(value, sizeof value, "%08x", 7u * 2654435761u);
    CHECK(put(1, S1, "rank/7", value) == RDV_SAME, "a retry of a key held: the same");
    CHECK(put(1, S1, "rank/7", "00") == RDV_CONFLICT, "another value of a key held: a conflict, not full");
    rendezvous_stats st;
    rendezvous_take_stats(&st);
    CHECK(st.runs == 1 && st.keys == RENDEZVOUS_KEYS_MAX, "stats: 1 run, 4096 keys: %llu %llu",
          (unsigned long long)st.runs, (unsigned long long)st.keys);
    rendezvous_close(1);
    rendezvous_take_stats(&st);
    CHECK(st.runs == 0 && st.keys == 0 && st.bytes == 0, "closed: nothing held");
    rendezvous_result res;
    CHECK(!get(1, S1, "rank/7", &res) && res == RDV_NOT_ACTIVE, "a closed run is not active");
    CHECK(put(1, S1, "rank/7", "00") == RDV_NOT_ACTIVE, "nor takes a write");
}

static void write_once_and_secrets(void) {
    rendezvous_open(2, S1);
    rendezvous_open(3, S2);
    rendezvous_result res;
    CHECK(!get(2, S1, "k", &res) && res == RDV_NOT_SET, "not set yet");
    CHECK(put(2, S1, "k", "abcd") == RDV_CREATED, "created");
    CHECK(put(2, S1, "k", "abcd") == RDV_SAME, "the same value: same");
    CHECK(put(2, S1, "k", "abce") == RDV_CONFLICT, "another value of the same length: conflict");
    CHECK(put(2, S1, "k", "ab") == RDV_CONFLICT, "a prefix of the value: conflict");
    CHECK(put(2, S1, "k", "") == RDV_CONFLICT, "an empty value: conflict");
    char *v = get(2, S1, "k", &res);
    CHECK(res == RDV_FOUND && v && strcmp(v, "abcd") == 0, "the first value stays: %s", v ? v : "(none)");
    free(v);
    CHECK(put(2, S2, "k2", "00") == RDV_BAD_SECRET, "another run's secret");
    CHECK(put(2, "111111111111111111111111111111", "k2", "00") == RDV_BAD_SECRET, "a prefix of the secret");
    CHECK(put(2, S1 "1", "k2", "00") == RDV_BAD_SECRET, "the secret and more");
    CHECK(put(2, NULL, "k2", "00") == RDV_BAD_SECRET && put(2, "", "k2", "00") == RDV_BAD_SECRET, "no secret");
    CHECK(!get(2, S2, "k", &res) && res == RDV_BAD_SECRET, "no read with another run's secret");
    CHECK(!get(3, S2, "k", &res) && res == RDV_NOT_SET, "runs do not share keys");
    CHECK(put(3, S2, "k", "ffff") == RDV_CREATED, "another run takes the same key");
    CHECK(put(99, S1, "k", "00") == RDV_NOT_ACTIVE, "no such run");

    /* open again (a resumed run, a new secret): empty, and the old secret opens nothing */
    rendezvous_open(2, S2);
    CHECK(!get(2, S2, "k", &res) && res == RDV_NOT_SET, "opened again: empty");
    CHECK(put(2, S1, "k", "00") == RDV_BAD_SECRET, "opened again: the earlier secret is refused");
    rendezvous_close(2);
    rendezvous_close(3);
    rendezvous_close(3); /* nothing open: nothing happens */

    rendezvous_open(4, "");
    CHECK(put(4, "", "k", "00") == RDV_BAD_SECRET, "an empty held secret opens nothing");
    rendezvous_close(4);
}

/* Writers on several threads: each writes its own keys and one shared key with its
 * own value. */
#define THREADS 8
#define PER_THREAD 300
static int shared_created;
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;

static void *writer(void *arg) {
    int t = (int)(intptr_t)arg;
    char key[32], value[16];
    snprintf(value, sizeof value, "%02x", t);
    if (put(5, S1, "shared", value) == RDV_CREATED) {
        pthread_mutex_lock(&shared_mu);
        shared_created++;
        pthread_mutex_unlock(&shared_mu);
    }
    for (int i = 0; i < PER_THREAD; i++) {
        snprintf(key, sizeof key, "t%d/%d", t, i);
        if (put(5, S1, key, value) != RDV_CREATED) return (void *)1;
    }
    return NULL;
}

static void threads(void) {
    rendezvous_open(5, S1);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t);
    int failed = 0;
    for (int t = 0; t < THREADS; t++) {
        void *rc;
        pthread_join(th[t], &rc);
        failed += rc != NULL;
    }
    CHECK(failed == 0, "every thread's own keys were created: %d failed", failed);
    CHECK(shared_created == 1, "the shared key was created once: %d", shared_created);
    rendezvous_stats st;
    rendezvous_take_stats(&st);
    CHECK(st.keys == THREADS * PER_THREAD + 1, "every key is held once: %llu", (unsigned long long)st.keys);
    int right = 0;
    for (int t = 0; t < THREADS; t++) {
        for (int i = 0; i < PER_THREAD; i++) {
            char key[32], value[16];
            snprintf(key, sizeof key, "t%d/%d", t, i);
            snprintf(value, sizeof value, "%02x", t);
            rendezvous_result res;
            char *got = get(5, S1, key, &res);
            right += got && strcmp(got, value) == 0;
            free(got);
        }
    }
    CHECK(right == THREADS * PER_THREAD, "each with its own writer's value: %d", right);
    rendezvous_close(5);
}

int main(void) {
    rules();
    many_keys();
    write_once_and_secrets();
    threads();
    return test_done("test_rendezvous");
}
