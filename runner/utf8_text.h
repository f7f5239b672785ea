/* Text from a rank (its output, its error file) goes into JSON events, which must be
 * valid UTF-8: a byte that does not belong to a valid sequence becomes '?', and a
 * sequence cut short at the end (a clipped line) is dropped. */
#ifndef DDPD_RUNNER_UTF8_TEXT_H
#define DDPD_RUNNER_UTF8_TEXT_H

/* Makes the NUL-terminated `s` valid UTF-8 in place. */
void utf8_repair(char *s);

#endif
