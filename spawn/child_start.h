/* What a forked child of any of ddpd's programs does first, before it runs code of
 * its own or execs: the server's supervisor (posix_spawn, with child_default_signals)
 * and an agent's parts, ddp-trainer's ranks (which run on without exec) and ddp-run's
 * (the user's command). A library below all of them: it includes nothing of theirs.
 *   - its life tied to its parent's (child_tie_to_parent): SIGKILL when the process
 *     that forked it ends, even a SIGKILLed one;
 *   - its signals (child_signals): those its parent blocks, ignores or waits for back
 *     to their default actions, and the mask it starts with.
 * Between fork and exec only async-signal-safe calls are allowed (the parent may
 * have threads): these make no others. */
#ifndef DDPD_SPAWN_CHILD_START_H
#define DDPD_SPAWN_CHILD_START_H

#include <signal.h>
#include <sys/types.h>

/* In the child: it gets SIGKILL when `parent`, the process that forked it, ends
 * (PR_SET_PDEATHSIG, which follows the thread that forked). 0, or -1 when it cannot
 * be tied or `parent` has ended already: then nothing would stop it later, and the
 * child should _exit at once. */
int child_tie_to_parent(pid_t parent);

/* The signals a server or a launcher blocks, ignores or waits for, which a child
 * that execs a program gets back with their default actions: SIGPIPE, SIGTERM,
 * SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2. */
void child_default_signals(sigset_t *set);

/* In the child: the signals of `to_default` back to their default actions, then
 * `mask` its signal mask (NULL: none blocked). */
void child_signals(const sigset_t *to_default, const sigset_t *mask);

/* In the child, before exec: child_default_signals' back to their defaults, none
 * blocked (how the server's children start). */
void child_reset_signals(void);

#endif
