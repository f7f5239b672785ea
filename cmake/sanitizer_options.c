/* The sanitizer build's runtime defaults, compiled into each of its executables
 * (CMakeLists.txt adds this file to every one when DDPD_SANITIZE is on), so that a
 * binary of build-sanitize/ behaves the same in ctest, under ddpd and by hand.
 * ASAN_OPTIONS / UBSAN_OPTIONS in the environment still override them.
 *
 * handle_sigbus=0: a SIGBUS kills the process as it would without ASan. A rank whose
 * mapped dataset cache is cut short dies of it, and the trainer's launcher names the
 * cache from that signal; ASan's own handler would turn it into exit status 1. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void) { return "handle_sigbus=0:detect_leaks=1"; }
const char *__ubsan_default_options(void) { return "print_stacktrace=1"; }
