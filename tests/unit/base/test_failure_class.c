/* The failure classifier (base/failure_class.h) over real outputs: each file of
 * failure_outputs/ is what a rank printed as it failed, recorded by record.py with
 * Debian's python3 and python3-torch (MemoryError, torch's CPU allocator, gloo's
 * timeout and lost peer, tracebacks, SIGSEGV, SIGABRT) or transcribed from public
 * sources where no GPU was at hand (CUDA's out of memory, NCCL's error and watchdog:
 * each file says so). Its first line is the rank's end ("# exit 1", "# signal 11"). */
#include "check.h"

#include <signal.h>
#include <string.h>

#include "failure_class.h"

static char texts[64 * 1024];

/* The recorded output NAME (its comment lines dropped) into texts; its end into in. */
static const char *recorded(const char *name, failure_input *in) {
    const char *src = getenv("DDPD_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/unit/base/failure_outputs/%s.txt", src ? src : ".", name);
    FILE *f = fopen(path, "r");
    REQUIRE(f, "%s: cannot be read", path);
    *in = (failure_input){.exit_code = -1, .oom_kills = -1, .stepped = -1};
    size_t n = 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        int v;
        if (sscanf(line, "# exit %d", &v) == 1) in->exit_code = v;
        else if (sscanf(line, "# signal %d", &v) == 1) in->signal = v;
        else if (strncmp(line, "# ", 2) != 0 && n + strlen(line) < sizeof texts) {
            memcpy(texts + n, line, strlen(line));
            n += strlen(line);
        }
    }
    texts[n] = '\0';
    fclose(f);
    in->output = texts;
    return texts;
}

static void expect(const char *what, const failure_input *in, failure_class cls, const char *evidence) {
    failure_verdict v;
    failure_classify(in, &v);
    CHECK(v.cls == cls, "%s: class %s, expected %s (evidence: %s)", what, failure_class_name(v.cls),
          failure_class_name(cls), v.evidence);
    CHECK(strstr(v.evidence, evidence) != NULL, "%s: evidence '%s' does not hold '%s'", what, v.evidence, evidence);
}

static void expect_recorded(const char *name, int stepped, failure_class cls, const char *evidence) {
    failure_input in;
    recorded(name, &in);
    in.stepped = stepped;
    expect(name, &in, cls, evidence);
}

int main(void) {
    /* recorded here, with /usr/bin/python3 and python3-torch */
    expect_recorded("memory_error", 0, FAILURE_OOM, "MemoryError");
    expect_recorded("torch_cpu_oom", 1, FAILURE_OOM, "DefaultCPUAllocator: can't allocate memory");
    expect_recorded("gloo_timeout", 1, FAILURE_COLLECTIVE, "unbound_buffer.cc:81] Timed out waiting 3000ms");
    expect_recorded("gloo_peer_gone", 1, FAILURE_COLLECTIVE, "Connection closed by peer");
    expect_recorded("module_not_found", 0, FAILURE_SCRIPT_ERROR, "ModuleNotFoundError: No module named 'no_such_module'");
    expect_recorded("module_not_found", 1, FAILURE_SCRIPT_ERROR, "no_such_module"); /* late, it is no less */
    expect_recorded("syntax_error", -1, FAILURE_SCRIPT_ERROR, "SyntaxError: invalid syntax");
    expect_recorded("file_not_found", 0, FAILURE_SCRIPT_ERROR, "FileNotFoundError: [Errno 2]");
    expect_recorded("file_not_found", 1, FAILURE_EXIT, "exit status 1"); /* after a step: a file may come back */
    expect_recorded("segfault", 1, FAILURE_CRASH, "SIGSEGV");
    expect_recorded("abort", 1, FAILURE_CRASH, "SIGABRT");
    expect_recorded("value_error_late", 1, FAILURE_EXIT, "exit status 1");
    /* transcribed: CUDA and NCCL */
    expect_recorded("cuda_oom", 1, FAILURE_OOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB");
    expect_recorded("nccl_error", 1, FAILURE_COLLECTIVE, "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp");
    expect_recorded("nccl_watchdog", 1, FAILURE_COLLECTIVE, "Watchdog caught collective operation timeout");

    /* the cgroup's counter comes before any line: the kernel's kill says nothing */
    failure_input in;
    recorded("value_error_late", &in);
    in.exit_code = -1;
    in.signal = SIGKILL;
    in.oom_kills = 1;
    in.memory_max = "256 MiB (resources.memory_gb)";
    expect("oom kill counted", &in, FAILURE_OOM, "counted 1 OOM kill (oom_kill); its memory limit is 256 MiB");
    in.oom_kills = 0;
    expect("SIGKILL without an oom kill", &in, FAILURE_EXIT, "SIGKILL");
    in.oom_kills = -1;
    expect("SIGKILL, the counter unknown", &in, FAILURE_EXIT, "SIGKILL");

    /* the server's own ends come first: a hang that ended in a gloo timeout is a hang */
    recorded("gloo_timeout", &in);
    in.hang = 1;
    expect("hang watch", &in, FAILURE_HANG, "hang watch");
    in.hang = 0;
    in.lost = "node b stopped answering (no heartbeat for 30 s)";
    expect("a lost node", &in, FAILURE_INFRA, "node b stopped answering");

    /* the built-in trainer's own errors */
    in = (failure_input){.exit_code = 2, .oom_kills = -1, .stepped = 0,
                         .reason = "ddp-trainer: run.json is not a valid run config: /train/lr: must be > 0"};
    expect("config", &in, FAILURE_CONFIG, "is not a valid run config");
    in.reason = "cannot load the training data: /data/train-images-idx3-ubyte: no such file";
    expect("data", &in, FAILURE_DATA, "cannot load the training data");

    /* lines: a launcher's rank prefix is no obstacle; a name inside a sentence is no exception */
    in = (failure_input){.exit_code = 1, .oom_kills = -1, .stepped = 1,
                         .output = "step 5\n[rank1]: torch.OutOfMemoryError: CUDA out of memory.\n"};
    expect("rank prefix", &in, FAILURE_OOM, "[rank1]: torch.OutOfMemoryError");
    in.output = "print: no MemoryError here, nor ImportError\nTraceback:\nRuntimeError: bad value\r\n";
    expect("names in a sentence", &in, FAILURE_EXIT, "exit status 1");
    in.output = "Warning: ImportErrorish: nothing\nImportError: cannot import name 'x' from 'y'";
    expect("ImportError, no newline at the end", &in, FAILURE_SCRIPT_ERROR, "ImportError: cannot import name 'x'");
    in.output = NULL;
    in.exit_code = -1;
    expect("no status at all", &in, FAILURE_EXIT, "without an exit status");

    /* the evidence is clipped whole */
    static char long_line[2000];
    memset(long_line, 'x', sizeof long_line - 1);
    memcpy(long_line, "MemoryError: \xc3\xa9", 15);
    for (int i = 15; i + 2 < (int)sizeof long_line; i += 2) memcpy(long_line + i, "\xc3\xa9", 2);
    in.output = long_line;
    failure_verdict v;
    failure_classify(&in, &v);
    CHECK(v.cls == FAILURE_OOM && strlen(v.evidence) < sizeof v.evidence && strlen(v.evidence) > 400,
          "a long line clipped: %zu", strlen(v.evidence));
    CHECK(((unsigned char)v.evidence[strlen(v.evidence) - 1] & 0xC0) == 0x80 &&
              (unsigned char)v.evidence[strlen(v.evidence) - 2] == 0xc3, "clipped between sequences");

    /* names */
    for (int c = 0; c < FAILURE_CLASS_COUNT; c++) {
        failure_class back;
        CHECK(failure_class_parse(failure_class_name((failure_class)c), &back) == 0 && back == (failure_class)c,
              "class %d's name %s parses back", c, failure_class_name((failure_class)c));
    }
    failure_class none;
    CHECK(failure_class_parse("segfault", &none) != 0, "an unknown class is refused");
    return test_done("test_failure_class");
}
