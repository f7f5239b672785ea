/* Secrets: the random ones ddpd makes (a run's secret for its event socket), and the
 * one way it compares a secret it was given with the one it holds: in time that
 * depends on the held secret's length only, never on how many bytes match. (A secret
 * given in a file is read by base/secret_file.h.) */
#ifndef DDPD_SERVER_LIB_SECRET_H
#define DDPD_SERVER_LIB_SECRET_H

#include <stdbool.h>
#include <stddef.h>

/* 2*nbytes hex digits and a NUL into out, from getrandom(). 0 or -1. */
int random_hex(char *out, size_t nbytes);

/* given == held, in constant time in held's bytes; false when either is NULL or
 * held is empty. */
bool secret_equal(const char *given, const char *held);


#endif
