/* The error file a rank may leave at TORCHELASTIC_ERROR_FILE (torch's @record
 * writes one when the decorated function raises): its message explains the failure
 * better than the rank's last line. */
#ifndef DDPD_RUNNER_ERROR_FILE_H
#define DDPD_RUNNER_ERROR_FILE_H

#include <stddef.h>

/* <run_dir>/ranks/rank-N.error.json, the path every rank is given. */
void error_file_path(char *out, size_t n, const char *run_dir, int rank);

/* The message of the error file at `path` ({"message": {"message": "..."}} as torch
 * writes it, or {"message": "..."}), its first line, into out. 1 when there was one. */
int error_file_message(const char *path, char *out, size_t n);

#endif
