/* GPU discovery without CUDA and the device-to-rank mapping from
 * CUDA_VISIBLE_DEVICES (trainer/cuda/gpu_devices.c), on the CPU: a fake driver
 * listing in a temporary directory, then indices, UUIDs (whole and prefixes), MIG
 * instances, an empty value, invalid and repeated entries (CUDA cuts the list
 * there), and fewer GPUs than ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "cuda/gpu_devices.h"

static char root[256];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    REQUIRE(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* A /proc/driver/nvidia/gpus look-alike with three GPUs, listed out of bus order. */
static void make_proc(const char *dir) {
    const char *bus[] = {"0000:c1:00.0", "0000:18:00.0", "0000:4e:00.0"};
    const char *uuid[] = {"GPU-cccc3333-0000-0000-0000-000000000003", "GPU-aaaa1111-0000-0000-0000-000000000001",
                          "GPU-aaaa2222-0000-0000-0000-000000000002"};
    mkdir(dir, 0755);
    for (int i = 0; i < 3; i++) {
        char path[1024], text[512];
        snprintf(path, sizeof path, "%s/%s", dir, bus[i]);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/%s/information", dir, bus[i]);
        snprintf(text, sizeof text,
                 "Model: \t\t NVIDIA H200\nIRQ:   \t\t 17\nGPU UUID: \t %s\nVideo BIOS: \t 96.00.74.00.0d\n"
                 "Bus Type: \t PCIe\nDevice Minor: \t %d\n",
                 uuid[i], i);
        write_file(path, text);
    }
}

static void test_scan(gpu_present *p) {
    char proc[300], dev[300], none[300];
    snprintf(proc, sizeof proc, "%s/gpus", root);
    snprintf(dev, sizeof dev, "%s/dev", root);
    snprintf(none, sizeof none, "%s/none", root);
    make_proc(proc);
    mkdir(dev, 0755);
    mkdir(none, 0755);
    const char *nodes[] = {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-modeset", "nvme0"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", dev, nodes[i]);
        write_file(path, "");
    }

    REQUIRE(gpu_present_scan(p, proc, dev) == 3, "three GPUs listed, got %d", p->count);
    CHECK(strcmp(p->gpu[0].bus_id, "0000:18:00.0") == 0 && strcmp(p->gpu[2].bus_id, "0000:c1:00.0") == 0,
          "in PCI bus order (nvidia-smi's numbering): %s %s %s", p->gpu[0].bus_id, p->gpu[1].bus_id, p->gpu[2].bus_id);
    CHECK(strcmp(p->gpu[0].uuid, "GPU-aaaa1111-0000-0000-0000-000000000001") == 0, "uuid: '%s'", p->gpu[0].uuid);
    CHECK(strcmp(p->gpu[1].model, "NVIDIA H200") == 0, "model: '%s'", p->gpu[1].model);

    gpu_present d;
    CHECK(gpu_present_scan(&d, none, dev) == 2, "without /proc: the nvidiaN nodes (not ctl, uvm...), got %d", d.count);
    CHECK(d.gpu[0].uuid[0] == '\0' && strstr(d.source, "/dev/nvidiaN"), "unknown UUIDs; source: %s", d.source);
    gpu_present z;
    CHECK(gpu_present_scan(&z, none, none) == 0, "no GPU");
    CHECK(strstr(z.source, "no NVIDIA GPU") != NULL, "says so: %s", z.source);
    printf("  %s\n  %s\n  %s\n", p->source, d.source, z.source);
}

static void expect(const gpu_present *p, const char *cvd, int count, const int *physical, const char *note_has) {
    gpu_visible v;
    gpu_visible_resolve(cvd, p, &v);
    CHECK(v.count == count, "CUDA_VISIBLE_DEVICES=%s: %d visible, expected %d (%s)", cvd ? cvd : "(unset)", v.count,
          count, v.note);
    for (int i = 0; i < count && i < v.count; i++)
        CHECK(v.physical[i] == physical[i], "CUDA_VISIBLE_DEVICES=%s: entry %d is GPU %d, expected %d",
              cvd ? cvd : "(unset)", i, v.physical[i], physical[i]);
    if (note_has) CHECK(strstr(v.note, note_has) != NULL, "note '%s' lacks '%s'", v.note, note_has);
}

static void test_visible(const gpu_present *p) {
    expect(p, NULL, 3, (int[]){0, 1, 2}, "unset");
    expect(p, "", 0, NULL, "empty");
    expect(p, " ", 0, NULL, "empty");
    expect(p, "2", 1, (int[]){2}, NULL);
    expect(p, "1,0", 2, (int[]){1, 0}, NULL);
    expect(p, " 2 , 0 ", 2, (int[]){2, 0}, NULL);
    expect(p, "0,5,1", 1, (int[]){0}, "'5'");           /* CUDA stops at an invalid index */
    expect(p, "1,-1,2", 1, (int[]){1}, "'-1'");
    expect(p, "0,0", 1, (int[]){0}, "repeats");         /* and at a repeated one */
    expect(p, "abc", 0, NULL, "'abc'");
    expect(p, "GPU-aaaa2222-0000-0000-0000-000000000002,GPU-cccc3333-0000-0000-0000-000000000003", 2, (int[]){1, 2},
           NULL);
    expect(p, "GPU-cccc", 1, (int[]){2}, NULL);         /* a unique prefix */
    expect(p, "GPU-aaaa", 0, NULL, "'GPU-aaaa'");       /* an ambiguous one */
    expect(p, "GPU-ffff", 0, NULL, NULL);                /* an unknown one */
    expect(p, "1,GPU-aaaa1111", 2, (int[]){1, 0}, NULL); /* indices and UUIDs mixed */
    expect(p, "MIG-3b9f6c1e-aaaa-bbbb-cccc-0123456789ab", 1, (int[]){-1}, NULL);

    gpu_present dev_only = {.count = 2};
    snprintf(dev_only.source, sizeof dev_only.source, "2 /dev/nvidiaN nodes");
    expect(&dev_only, "GPU-1234", 1, (int[]){-1}, NULL); /* UUIDs cannot be checked: trusted */
    gpu_present none = {.count = 0};
    snprintf(none.source, sizeof none.source, "no NVIDIA GPU on this host");
    expect(&none, NULL, 0, NULL, "no NVIDIA GPU");
    expect(&none, "0", 0, NULL, "no NVIDIA GPU");
}

static void test_rank_mapping(const gpu_present *p) {
    gpu_visible v;
    gpu_visible_resolve("2,0", p, &v);
    int ordinal = -1, physical = -1;
    CHECK(gpu_rank_device(&v, 0, &ordinal, &physical) == 0 && ordinal == 0 && physical == 2,
          "rank 0 -> CUDA device 0 = GPU 2 (got %d, %d)", ordinal, physical);
    CHECK(gpu_rank_device(&v, 1, &ordinal, &physical) == 0 && ordinal == 1 && physical == 0,
          "rank 1 -> CUDA device 1 = GPU 0 (got %d, %d)", ordinal, physical);
    CHECK(gpu_rank_device(&v, 2, &ordinal, &physical) == -1, "three ranks on two visible GPUs: no device for rank 2");
    char label[128];
    gpu_device_label(&v, p, 0, "NVIDIA H200", label, sizeof label);
    CHECK(strcmp(label, "cuda:2 NVIDIA H200") == 0, "label: %s", label);
    gpu_device_label(&v, p, 1, NULL, label, sizeof label);
    CHECK(strcmp(label, "cuda:0 NVIDIA H200") == 0, "label from the driver's model: %s", label);
    gpu_visible_resolve("MIG-3b9f6c1e", p, &v);
    gpu_device_label(&v, p, 0, "NVIDIA H200 MIG 1g.18gb", label, sizeof label);
    CHECK(strcmp(label, "cuda:0 NVIDIA H200 MIG 1g.18gb") == 0, "unknown physical index: the ordinal: %s", label);
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(root, sizeof root, "%s/ddpd-test-gpu-devices-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(root) != NULL, "mkdtemp %s", root);
    gpu_present p;
    test_scan(&p);
    test_visible(&p);
    test_rank_mapping(&p);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return test_done("test_gpu_devices");
}
