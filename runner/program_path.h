/* Where a command run's program is: the file execvp would run for argv[0], looked
 * up on the ranks' PATH (or taken from the working directory for "./x"), so that
 * the launcher names it (the interpreter a rank's log was written by) and says what
 * to pass when there is none. */
#ifndef DDPD_RUNNER_PROGRAM_PATH_H
#define DDPD_RUNNER_PROGRAM_PATH_H

#include <stddef.h>

/* The ranks' PATH: the config's env PATH, else the launcher's, else execvp's default. */
const char *program_search_path(char *const *config_env);

/* The absolute path of `prog` into out (0), or -1 when no executable file answers
 * to it. A name with a slash is taken relative to `working_dir`. */
int program_resolve(const char *prog, const char *search_path, const char *working_dir, char *out, size_t n);

/* The sentence for a program that is not there (ENOENT): what to pass instead. */
void program_missing_hint(const char *prog, const char *search_path, char *out, size_t n);

#endif
