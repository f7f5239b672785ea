/* libFuzzer harness: the safetensors reader (trainer/ckpt_files/safetensors.c) on any file, and
 * every tensor its header names read as F32 with the count its shape says. Must
 * fail cleanly or read inside the file. */
#include <jansson.h>
#include <stdint.h>
#include <unistd.h>

#include "fuzz_input_file.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_input_file("checkpoint", data, n);
    st_file f;
    char err[1024];
    if (st_open(path, &f, err, sizeof err) == 0) {
        const char *name;
        json_t *info;
        json_object_foreach(f.header, name, info) {
            json_t *shape = json_object_get(info, "shape");
            size_t count = 1, i;
            json_t *dim;
            json_array_foreach(shape, i, dim) count *= (size_t)json_integer_value(dim);
            const float *t = st_get_f32(&f, name, count, err, sizeof err);
            if (t && count) {
                volatile float sink = t[0] + t[count - 1];
                (void)sink;
            }
        }
        st_metadata(&f, "format");
        st_close(&f);
    } else if (!err[0]) {
        __builtin_trap();
    }
    unlink(path);
    return 0;
}
