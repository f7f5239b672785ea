/* Checkpoints: see checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_files.h"
#include "paths.h"
#include "safetensors.h"

#define CKPT_FORMAT "ddpd-checkpoint-1"

typedef struct {
    st_tensor t[MODEL_MAX_LAYERS * 10];
    char names[MODEL_MAX_LAYERS * 10][96];
    size_t n;
} tensor_list;

/* One layer's tensors: its name and PyTorch shape, and where it lives. */
typedef struct {
    const char *suffix; /* "weight", "bias", "running_mean", "running_var" */
    size_t offset, count;
    int in_stats;       /* in the running statistics, not the parameter buffer */
    size_t shape[4];
    int ndim;
} layer_tensor;

/* The tensors of layer L (with parameters); returns how many. */
static int layer_tensors(const model_layer *L, layer_tensor out[4]) {
    int n = 0;
    size_t k = (size_t)L->kernel;
    switch (L->kind) {
    case LAYER_LINEAR:
        out[n++] = (layer_tensor){"weight", L->w_off, L->n_w, 0, {(size_t)L->out_c, (size_t)L->in_c}, 2};
        break;
    case LAYER_CONV2D:
        out[n++] = (layer_tensor){"weight", L->w_off, L->n_w, 0, {(size_t)L->out_c, (size_t)L->in_c, k, k}, 4};
        break;
    default: out[n++] = (layer_tensor){"weight", L->w_off, L->n_w, 0, {L->n_w}, 1}; break;
    }
    if (L->n_b) out[n++] = (layer_tensor){"bias", L->b_off, L->n_b, 0, {L->n_b}, 1};
    if (L->kind == LAYER_BATCHNORM2D) {
        size_t C = (size_t)L->out_c;
        out[n++] = (layer_tensor){"running_mean", L->stat_off, C, 1, {C}, 1};
        out[n++] = (layer_tensor){"running_var", L->stat_off + C, C, 1, {C}, 1};
    }
    return n;
}

/* The tensors of one buffer laid out like the parameters (params, or an optimizer
 * state), and the running statistics when `stats` is not NULL. */
static void add_buffer(tensor_list *tl, const model_shape *s, const char *prefix, const float *buf,
                       const float *stats) {
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        if (!model_layer_has_params(s, l)) continue;
        layer_tensor lt[4];
        int n = layer_tensors(L, lt);
        for (int k = 0; k < n; k++) {
            if (lt[k].in_stats && !stats) continue;
            size_t i = tl->n++;
            snprintf(tl->names[i], sizeof tl->names[i], "%slayers.%d.%s", prefix, L->param_index, lt[k].suffix);
            tl->t[i] = (st_tensor){.name = tl->names[i],
                                   .data = (lt[k].in_stats ? stats : buf) + lt[k].offset,
                                   .ndim = lt[k].ndim};
            memcpy(tl->t[i].shape, lt[k].shape, sizeof lt[k].shape);
        }
    }
}

static void set_str(json_t *meta, const char *key, const char *fmt, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, fmt, v);
    json_object_set_new(meta, key, json_string(buf));
}

static void remove_old(const char *dir, int keep, json_t *removed) {
    struct dirent **list;
    int n = scandir(dir, &list, NULL, alphasort);
    if (n < 0) return;
    int kept = 0;
    for (int i = n - 1; i >= 0; i--) { /* newest first: names sort by epoch */
        const char *name = list[i]->d_name;
        if (ckpt_is_file_name(name) && ++kept > keep) {
            char path[4096];
            if (path_join(path, sizeof path, dir, name) == 0 && unlink(path) == 0 && removed)
                json_array_append_new(removed, json_string(path));
        }
        free(list[i]);
    }
    free(list);
}

int checkpoint_save(const char *run_dir, const run_config *cfg, const model_shape *s, const float *params,
                    const float *stats, const optimizer *opt, ckpt_position pos, char *path_out, size_t path_len,
                    size_t *bytes_out, json_t *removed, char *err, size_t errlen) {
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
    if (pos.next_step > 0) /* within an epoch (a preemption): sorts between the ends of the epochs around it */
        snprintf(name, sizeof name, CKPT_PREFIX "%04d-step-%09ld" CKPT_SUFFIX, pos.next_epoch, pos.next_step);
    else
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
    add_buffer(tl, s, "", params, stats);
    char prefix[64];
    if (optimizer_state1_name(opt)) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", optimizer_state1_name(opt));
        add_buffer(tl, s, prefix, opt->state1, NULL);
    }
    if (optimizer_state2_name(opt)) {
        snprintf(prefix, sizeof prefix, "optimizer.%s.", optimizer_state2_name(opt));
        add_buffer(tl, s, prefix, opt->state2, NULL);
    }

    json_t *meta = json_object();
    json_object_set_new(meta, "format", json_string(CKPT_FORMAT));
    set_str(meta, "next_epoch", "%lld", pos.next_epoch);
    set_str(meta, "next_step", "%lld", pos.next_step);
    set_str(meta, "global_step", "%lld", pos.global_step);
    set_str(meta, "optimizer_step", "%lld", opt->step);
    set_str(meta, "sampler_seed", "%llu", (long long)cfg->seed);
    if (pos.next_step > 0) {
        char sum[64];
        snprintf(sum, sizeof sum, "%a", pos.epoch_loss_sum); /* hexadecimal: read back to the bit */
        json_object_set_new(meta, "epoch_loss_sum", json_string(sum));
        set_str(meta, "epoch_steps", "%lld", pos.epoch_steps);
    }
    json_object_set_new(meta, "optimizer", json_string(optimizer_name(opt->type)));
    json_object_set_new(meta, "model", json_string(model_kind_name(s->kind)));
    json_object_set_new(meta, "activation", json_string(activation_name(s->act)));
    int rc = safetensors_write(path_out, tl->t, tl->n, meta, err, errlen);
    json_decref(meta);
    free(tl);
    if (rc != 0) return -1;
    struct stat st;
    *bytes_out = stat(path_out, &st) == 0 ? (size_t)st.st_size : 0;
    remove_old(dir, cfg->checkpoint.keep, removed);
    return 0;
}

int checkpoint_find_latest(const char *run_dir, char *path, size_t path_len, char *err, size_t errlen) {
    char dir[2048];
    if (path_join(dir, sizeof dir, run_dir, CKPT_DIR) != 0) {
        snprintf(err, errlen, "the run directory's path is too long");
        return -1;
    }
    int rc = ckpt_newest_in(dir, path, path_len);
    if (rc < 0) snprintf(err, errlen, "no checkpoint to resume from: %s: %s", dir, strerror(errno));
    else if (rc > 0) snprintf(err, errlen, "no checkpoint to resume from: %s holds no " CKPT_PREFIX "*" CKPT_SUFFIX, dir);
    return rc == 0 ? 0 : -1;
}

static int load_buffer(const st_file *f, const model_shape *s, const char *prefix, float *buf, float *stats,
                       char *err, size_t errlen) {
    char name[128];
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        if (!model_layer_has_params(s, l)) continue;
        layer_tensor lt[4];
        int n = layer_tensors(L, lt);
        for (int k = 0; k < n; k++) {
            if (lt[k].in_stats && !stats) continue;
            snprintf(name, sizeof name, "%slayers.%d.%s", prefix, L->param_index, lt[k].suffix);
            const float *v = st_get_f32(f, name, lt[k].count, err, errlen);
            if (!v) return -1;
            memcpy((lt[k].in_stats ? stats : buf) + lt[k].offset, v, sizeof(float) * lt[k].count);
        }
    }
    return 0;
}

static long meta_long(const st_file *f, const char *key, long fallback) {
    const char *v = st_metadata(f, key);
    return v ? strtol(v, NULL, 10) : fallback;
}

int checkpoint_load(const char *path, const model_shape *s, float *params, float *stats, optimizer *opt,
                    ckpt_position *pos, char *err, size_t errlen) {
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
    const char *saved_model = st_metadata(&f, "model"); /* older checkpoints: mlp */
    if (saved_model && strcmp(saved_model, model_kind_name(s->kind)) != 0) {
        snprintf(err, errlen, "%s holds a %s model but the config asks for a %s", path, saved_model,
                 model_kind_name(s->kind));
        goto out;
    }
    if (s->n_param_layers > 0) {
        char name[64];
        snprintf(name, sizeof name, "layers.%d.weight", s->n_param_layers);
        if (json_object_get(f.header, name)) {
            snprintf(err, errlen, "%s was made for a model with more layers than this config's", path);
            goto out;
        }
    }
    if (load_buffer(&f, s, "", params, stats, sub, sizeof sub) != 0) {
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
            if (load_buffer(&f, s, prefix, opt->state1, NULL, sub, sizeof sub) != 0) {
                snprintf(err, errlen, "%s: optimizer state does not fit: %s", path, sub);
                goto out;
            }
        }
        if (optimizer_state2_name(opt)) {
            snprintf(prefix, sizeof prefix, "optimizer.%s.", optimizer_state2_name(opt));
            if (load_buffer(&f, s, prefix, opt->state2, NULL, sub, sizeof sub) != 0) {
                snprintf(err, errlen, "%s: optimizer state does not fit: %s", path, sub);
                goto out;
            }
        }
        opt->step = meta_long(&f, "optimizer_step", 0);
    }
    pos->next_epoch = (int)meta_long(&f, "next_epoch", 0);
    pos->next_step = meta_long(&f, "next_step", 0);
    pos->global_step = meta_long(&f, "global_step", 0);
    const char *sum = st_metadata(&f, "epoch_loss_sum");
    pos->epoch_loss_sum = sum ? strtod(sum, NULL) : 0.0;
    pos->epoch_steps = meta_long(&f, "epoch_steps", 0);
    rc = 0;
out:
    st_close(&f);
    return rc;
}
