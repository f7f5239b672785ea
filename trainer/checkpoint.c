/* Checkpoints: see checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "paths.h"
#include "safetensors.h"

#define CKPT_FORMAT "ddpd-checkpoint-1"
#define CKPT_DIR "checkpoints"
#define CKPT_PREFIX "epoch-"
#define CKPT_SUFFIX ".safetensors"

typedef struct {
    st_tensor t[MLP_MAX_LAYERS * 6];
    char names[MLP_MAX_LAYERS * 6][96];
    size_t n;
} tensor_list;

static void add_tensor(tensor_list *tl, const char *prefix, const char *layer_name, const float *data, size_t d0,
                       size_t d1, int ndim) {
    size_t i = tl->n++;
    snprintf(tl->names[i], sizeof tl->names[i], "%s%s", prefix, layer_name);
    tl->t[i] = (st_tensor){.name = tl->names[i], .data = data, .shape = {d0, d1}, .ndim = ndim};
}

/* The tensors of one buffer laid out like the parameters (params, or a state). */
static void add_buffer(tensor_list *tl, const mlp_shape *s, const char *prefix, const float *buf) {
    char name[64];
    for (int l = 0; l < s->n_layers; l++) {
        const mlp_layer *L = &s->layer[l];
        snprintf(name, sizeof name, "layers.%d.weight", l);
        add_tensor(tl, prefix, name, buf + L->w_off, (size_t)L->out, (size_t)L->in, 2);
        snprintf(name, sizeof name, "layers.%d.bias", l);
        add_tensor(tl, prefix, name, buf + L->b_off, (size_t)L->out, 0, 1);
    }
}

static void set_str(json_t *meta, const char *key, const char *fmt, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, fmt, v);
    json_object_set_new(meta, key, json_string(buf));
}

static void remove_old(const char *dir, int keep) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    if (n < 0) return;
    int kept = 0;
    for (int i = n - 1; i >= 0; i--) { /* newest first: names sort by epoch */
        const char *name = list[i]->d_name;
        size_t len = strlen(name);
        int is_ckpt = strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) == 0 && len > strlen(CKPT_SUFFIX) &&
                      strcmp(name + len - strlen(CKPT_SUFFIX), CKPT_SUFFIX) == 0;
        if (is_ckpt && ++kept > keep) {
            char path[4096];
            if (path_join(path, sizeof path, dir, name) == 0) unlink(path);
        }
        free(list[i]);
    }
    free(list);
}

int checkpoint_save(const char *run_dir, const run_config *cfg, const mlp_shape *s, const float *params,
                    const optimizer *opt, ckpt_position pos, char *path_out, size_t path_len,
                    size_t *bytes_out, char *err, size_t errlen) {
    char dir[2048];
    if (path_join(dir, sizeof dir, run_dir, CKPT_DIR) != 0) {
        snprintf(err, errlen, "the run directory's path is too long");
        return -1;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    char name[64];
    snprintf(name, sizeof name, CKPT_PREFIX "%04d" CKPT_SUFFIX, pos.next_epoch - 1);
    if (path_join(path_out, path_len, dir, name) != 0) {
        snprintf(err, errlen, "the checkpoint path is too long");
        return -1;
    }

    tensor_list *tl = calloc(1, sizeof *tl);
    if (!tl) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    add_buffer(tl, s, "", params);
    char prefix[64];
    if (optimizer_state1_name(opt)) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", optimizer_state1_name(opt));
        add_buffer(tl, s, prefix, opt->state1);
    }
    if (optimizer_state2_name(opt)) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", optimizer_state2_name(opt));
        add_buffer(tl, s, prefix, opt->state2);
    }

    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string(CKPT_FORMAT));
    set_str(meta, "next_epoch", "%lld", pos.next_epoch);
    set_str(meta, "next_step", "%lld", pos.next_step);
    set_str(meta, "global_step", "%lld", pos.global_step);
    set_str(meta, "optimizer_step", "%lld", opt->step);
    set_str(meta, "sampler_seed", "%llu", (long long)cfg->seed);
    json_object_set_new(meta, "optimizer", json_string(optimizer_name(opt->type)));
    json_object_set_new(meta, "activation", json_string(activation_name(s->act)));
    int rc = safetensors_write(path_out, tl->t, tl->n, meta, err, errlen);
    json_decref(meta);
    free(tl);
    if (rc != 0) return -1;
    struct stat st;
    *bytes_out = stat(path_out, &st) == 0 ? (size_t)st.st_size : 0;
    remove_old(dir, cfg->checkpoint.keep);
    return 0;
}

int checkpoint_find_latest(const char *run_dir, char *path, size_t path_len, char *err, size_t errlen) {
    char dir[2048];
    if (path_join(dir, sizeof dir, run_dir, CKPT_DIR) != 0) {
        snprintf(err, errlen, "the run directory's path is too long");
        return -1;
    }
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    if (n < 0) {
        snprintf(err, errlen, "no checkpoint to resume from: %s: %s", dir, strerror(errno));
        return -1;
    }
    int found = -1;
    for (int i = n - 1; i >= 0; i--) {
        const char *name = list[i]->d_name;
        size_t len = strlen(name);
        if (found < 0 && strncmp(name, CKPT_PREFIX, strlen(CKPT_PREFIX)) == 0 && len > strlen(CKPT_SUFFIX) &&
            strcmp(name + len - strlen(CKPT_SUFFIX), CKPT_SUFFIX) == 0) {
            found = path_join(path, path_len, dir, name);
        }
        free(list[i]);
    }
    free(list);
    if (found < 0) snprintf(err, errlen, "no checkpoint to resume from: %s holds no " CKPT_PREFIX "*" CKPT_SUFFIX, dir);
    return found;
}

static int load_buffer(const st_file *f, const mlp_shape *s, const char *prefix, float *buf, char *err,
                       size_t errlen) {
    char name[128];
    for (int l = 0; l < s->n_layers; l++) {
        const mlp_layer *L = &s->layer[l];
        snprintf(name, sizeof name, "%slayers.%d.weight", prefix, l);
        const float *w = st_get_f32(f, name, (size_t)L->out * L->in, err, errlen);
        if (!w) return -1;
        memcpy(buf + L->w_off, w, sizeof(float) * L->out * L->in);
        snprintf(name, sizeof name, "%slayers.%d.bias", prefix, l);
        const float *b = st_get_f32(f, name, (size_t)L->out, err, errlen);
        if (!b) return -1;
        memcpy(buf + L->b_off, b, sizeof(float) * L->out);
    }
    return 0;
}

static long meta_long(const st_file *f, const char *key, long fallback) {
    const char *v = st_metadata(f, key);
    return v ? strtol(v, NULL, 10) : fallback;
}

int checkpoint_load(const char *path, const mlp_shape *s, float *params, optimizer *opt, ckpt_position *pos,
                    char *err, size_t errlen) {
    st_file f;
    if (st_open(path, &f, err, errlen) != 0) return -1;
    int rc = -1;
    const char *format = st_metadata(&f, "format");
    char sub[512];
    if (!format || strcmp(format, CKPT_FORMAT) != 0) {
        snprintf(err, errlen, "%s is not a ddpd checkpoint (metadata format is %s, expected " CKPT_FORMAT ")", path,
                 format ? format : "missing");
        goto out;
    }
    if (s->n_layers > 0) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.weight", s->n_layers);
        if (json_object_get(f.header, name)) {
            snprintf(err, errlen, "%s was made for a model with more layers than this config's", path);
            goto out;
        }
    }
    if (load_buffer(&f, s, "", params, sub, sizeof sub) != 0) {
        snprintf(err, errlen, "%s does not fit this config's model: %s", path, sub);
        goto out;
    }
    if (opt) {
        const char *saved = st_metadata(&f, "optimizer");
        if (!saved || strcmp(saved, optimizer_name(opt->type)) != 0) {
            snprintf(err, errlen, "%s holds %s optimizer state but the config asks for %s", path,
                     saved ? saved : "no", optimizer_name(opt->type));
            goto out;
        }
        char prefix[64];
        if (optimizer_state1_name(opt)) {
            snprintf(prefix, sizeof prefix, "optimizer.%s.", optimizer_state1_name(opt));
            if (load_buffer(&f, s, prefix, opt->state1, sub, sizeof sub) != 0) {
                snprintf(err, errlen, "%s: optimizer state does not fit: %s", path, sub);
                goto out;
            }
        }
        if (optimizer_state2_name(opt)) {
            snprintf(prefix, sizeof prefix, "optimizer.%s.", optimizer_state2_name(opt));
            if (load_buffer(&f, s, prefix, opt->state2, sub, sizeof sub) != 0) {
                snprintf(err, errlen, "%s: optimizer state does not fit: %s", path, sub);
                goto out;
            }
        }
        opt->step = meta_long(&f, "optimizer_step", 0);
    }
    pos->next_epoch = (int)meta_long(&f, "next_epoch", 0);
    pos->next_step = meta_long(&f, "next_step", 0);
    pos->global_step = meta_long(&f, "global_step", 0);
    rc = 0;
out:
    st_close(&f);
    return rc;
}
