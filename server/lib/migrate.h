/* Database migrations: the numbered SQL files of migrations/ (embedded into the
 * binary at build time), applied in order at start-up, each in one transaction
 * that also sets PRAGMA user_version to its number. */
#ifndef DDPD_SERVER_LIB_MIGRATE_H
#define DDPD_SERVER_LIB_MIGRATE_H

#include <sqlite3.h>
#include <stddef.h>

typedef struct {
    int version;      /* the file's number: 0001_init.sql is 1 */
    const char *name; /* the file name, for messages */
    const char *sql;
} migration;

/* Brings `db` up to the last of `m[0..n)`, which must be numbered 1, 2, ... n.
 * Returns the version the database ends at, or -1 with a sentence in `err` (a failed
 * migration is rolled back: the database stays at the version before it). A database
 * newer than the last migration is refused: it belongs to a newer ddpd. */
int migrate_apply(sqlite3 *db, const migration *m, int n, char *err, size_t errlen);

#endif
