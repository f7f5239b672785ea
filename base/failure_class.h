/* A failed attempt's class (docs/failures.md): what ended it, told apart from its end
 * (exit status, signal, the run's cgroup's OOM count, the hang watch, a lost node or
 * launcher) and the tail of the failing rank's output, so that a restart policy can
 * answer each class its own way (an out-of-memory is not retried, a lost node is).
 * A pure function over a table of rules, one row per rule, first match wins: no I/O,
 * no clock, no allocation. Every program links it (ddp-run and ddp-trainer decide
 * their own restarts; the server classifies the attempts it ends itself). */
#ifndef DDPD_BASE_FAILURE_CLASS_H
#define DDPD_BASE_FAILURE_CLASS_H

#include <stddef.h>

typedef enum {
    FAILURE_OOM,          /* out of memory: the cgroup's OOM kill, CUDA's, a MemoryError, torch's CPU allocator */
    FAILURE_HANG,         /* the hang watch stopped it (distributed.hang_timeout_s) */
    FAILURE_COLLECTIVE,   /* an NCCL or gloo error or timeout in the rank's output */
    FAILURE_CRASH,        /* SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT */
    FAILURE_SCRIPT_ERROR, /* a Python error that no restart mends: SyntaxError, ImportError, ... */
    FAILURE_EXIT,         /* any other non-zero exit (or another signal) */
    FAILURE_INFRA,        /* a node, an agent, a launcher or the run's processes lost */
    FAILURE_DATA,         /* the built-in trainer could not load its data */
    FAILURE_CONFIG,       /* the built-in trainer refused its config */
    FAILURE_CLASS_COUNT
} failure_class;

/* What is known of an attempt's end. */
typedef struct {
    int exit_code;          /* the failing rank's exit status; -1: none (a signal ended it, or not known) */
    int signal;             /* the signal that ended it; 0: none */
    long oom_kills;         /* OOM kills the run's cgroup counted during the attempt; -1: not known */
    const char *memory_max; /* the limit, for the evidence ("512 MiB"); NULL: not known */
    int hang;               /* the hang watch stopped it */
    const char *lost;       /* what was lost, for the evidence ("node b stopped answering"); NULL: nothing */
    int stepped;            /* 1: the attempt reported a step; 0: none; -1: not known */
    const char *output;     /* the tail of the failing rank's output, oldest first; NULL: none */
    const char *reason;     /* the launcher's own reason (the built-in trainer's errors); NULL */
} failure_input;

typedef struct {
    failure_class cls;
    char evidence[512]; /* the line or counter that decided it */
} failure_verdict;

void failure_classify(const failure_input *in, failure_verdict *out);

/* "oom", "hang", ... */
const char *failure_class_name(failure_class c);

/* 0 and *out for a class's name, else -1. */
int failure_class_parse(const char *name, failure_class *out);

#endif
