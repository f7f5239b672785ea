/* The server's own paths kept out of what it answers: the state directory, the data
 * and work roots and the trainer's file become named roots ("<state-dir>/runs/3/...",
 * "<data-root>/train-images-idx3-ubyte"), so that a client learns paths relative to
 * a root it can name and nothing of the server's file system (serve --show-paths
 * turns this off). Rules are added at start-up, before any thread answers; applying
 * them is then safe from any thread. */
#ifndef DDPD_SERVER_LIB_PATH_REDACT_H
#define DDPD_SERVER_LIB_PATH_REDACT_H

#include <stdbool.h>
#include <stddef.h>

/* `prefix` (an absolute path; also its real path when that differs) is shown as
 * `label` wherever it stands as a whole path or a path's leading directories. */
void path_redact_add(const char *prefix, const char *label);
/* serve --show-paths: nothing is replaced. */
void path_redact_disable(void);
/* Every rule, at shutdown (and between tests). */
void path_redact_clear(void);

/* Replaces the prefixes in text[0..*len) in place (the text is malloc'd: it may be
 * moved and grown; a NUL follows it when it did). Prefixes are matched as they
 * stand in JSON as well as in plain text (a path needs no JSON escape but '\' and '"',
 * which a rule's prefix may not hold). Returns whether anything was replaced. */
bool path_redact_apply(char **text, size_t *len);

#endif
