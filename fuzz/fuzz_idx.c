/* libFuzzer harness: the IDX loader (trainer/idx.c) on any pair of files, plain or
 * gzipped. The first byte picks where the input splits into the images file and the
 * labels file, and a limit. Must fail cleanly (a message, nothing leaked) or load. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_input_file.h"
#include "idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 2) return 0;
    size_t split = 1 + (size_t)data[0] * (n - 1) / 256;
    size_t limit = data[1] % 4 == 0 ? 0 : data[1];
    const char *images = fuzz_input_file("images", data + 1, split - 1);
    const char *labels = fuzz_input_file("labels", data + split, n - split);
    idx_dataset d;
    char err[1024];
    if (idx_load(NULL, images, labels, limit, &d, err, sizeof err) == 0) {
        if (d.count == 0 || d.rows <= 0 || d.cols <= 0) __builtin_trap(); /* a loaded set is never empty */
        volatile uint8_t sink = d.images[d.count * (size_t)d.rows * d.cols - 1] ^ d.labels[d.count - 1];
        (void)sink;
        idx_free(&d);
    } else if (!err[0]) {
        __builtin_trap(); /* every failure says why */
    }
    unlink(images);
    unlink(labels);
    return 0;
}
