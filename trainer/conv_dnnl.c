/* Convolution forward on oneDNN: see conv_dnnl.h. Written against oneDNN's C API of
 * both major versions in the archives (2.x: Debian 12; 3.x: Ubuntu 24.04), which
 * differ in how memory descriptors are made and primitives described; the few calls
 * that differ sit behind the small helpers at the top. */
#include "conv_dnnl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddpd_build_config.h"

#if DDPD_HAVE_ONEDNN

#include <oneapi/dnnl/dnnl.h>
#if DDPD_HAVE_OPENMP
#include <omp.h>
#endif

/* Batch sizes a layer keeps primitives for at once (training, an epoch's last batch,
 * evaluation and its last batch). */
#define CACHED_SIZES 4

/* --- oneDNN 2.x / 3.x --------------------------------------------------------------- */

#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t md_ref; /* a descriptor as calls take it */
typedef struct {
    dnnl_memory_desc_t h;
} owned_md;
static md_ref md_of(const owned_md *m) { return m->h; }
static dnnl_status_t md_tag(owned_md *m, int nd, const dnnl_dims_t dims, dnnl_format_tag_t tag) {
    return dnnl_memory_desc_create_with_tag(&m->h, nd, dims, dnnl_f32, tag);
}
static void md_drop(owned_md *m) {
    if (m->h) dnnl_memory_desc_destroy(m->h);
    m->h = NULL;
}
static dnnl_status_t conv_forward_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, md_ref src, md_ref w, md_ref b,
                                     md_ref dst, const dnnl_dims_t strides, const dnnl_dims_t pad) {
    const dnnl_dims_t no_dilation = {0, 0};
    return dnnl_convolution_forward_primitive_desc_create(pd, eng, dnnl_forward_training, dnnl_convolution_direct, src,
                                                          w, b, dst, strides, no_dilation, pad, pad, NULL);
}
#else
typedef const dnnl_memory_desc_t *md_ref;
typedef struct {
    dnnl_memory_desc_t d;
    int set;
} owned_md;
static md_ref md_of(const owned_md *m) { return m->set ? &m->d : NULL; }
static dnnl_status_t md_tag(owned_md *m, int nd, const dnnl_dims_t dims, dnnl_format_tag_t tag) {
    m->set = 1;
    return dnnl_memory_desc_init_by_tag(&m->d, nd, dims, dnnl_f32, tag);
}
static void md_drop(owned_md *m) { m->set = 0; }
static dnnl_status_t conv_forward_pd(dnnl_primitive_desc_t *pd, dnnl_engine_t eng, md_ref src, md_ref w, md_ref b,
                                     md_ref dst, const dnnl_dims_t strides, const dnnl_dims_t pad) {
    dnnl_convolution_desc_t cd;
    dnnl_status_t st = dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, src, w,
                                                          b, dst, strides, pad, pad);
    return st != dnnl_success ? st : dnnl_primitive_desc_create(pd, &cd, NULL, eng, NULL);
}
#endif

/* --- the process's engine and stream --------------------------------------------------- */

static dnnl_engine_t cpu_engine;
static dnnl_stream_t cpu_stream;

static int engine_ready(void) {
    if (cpu_stream) return 0;
    if (!cpu_engine && dnnl_engine_create(&cpu_engine, dnnl_cpu, 0) != dnnl_success) return -1;
    return dnnl_stream_create(&cpu_stream, cpu_engine, dnnl_stream_default_flags) == dnnl_success ? 0 : -1;
}

/* --- one primitive per batch size ------------------------------------------------------- */

/* A tensor as the caller holds it (user) and as the primitive wants it; `reorder`
 * turns one into the other (NULL when they are the same layout). */
typedef struct {
    dnnl_memory_t user, inner;
    dnnl_primitive_t reorder;
    size_t inner_bytes;
} operand;

typedef struct {
    int rows; /* 0: free */
    unsigned long last_use;
    dnnl_primitive_t conv;
    operand src, weights, dst;
    dnnl_memory_t bias;
} conv_entry;

struct conv_dnnl {
    conv_dnnl_shape s;
    conv_entry entry[CACHED_SIZES];
    unsigned long uses;
    void *scratch[3];       /* the inner src, weights, dst of whichever entry runs */
    size_t scratch_bytes[3];
    char impl[64];
};

static void operand_free(operand *o) {
    if (o->reorder) dnnl_primitive_destroy(o->reorder);
    if (o->inner && o->inner != o->user) dnnl_memory_destroy(o->inner);
    if (o->user) dnnl_memory_destroy(o->user);
    memset(o, 0, sizeof *o);
}

static void entry_free(conv_entry *e) {
    if (e->conv) dnnl_primitive_destroy(e->conv);
    operand_free(&e->src);
    operand_free(&e->weights);
    operand_free(&e->dst);
    if (e->bias) dnnl_memory_destroy(e->bias);
    memset(e, 0, sizeof *e);
}

/* The user's layout `user` against the primitive's `inner`: a reorder between them
 * (user to inner for inputs, inner to user for the output) unless they are equal. */
static int operand_init(operand *o, md_ref user, md_ref inner, int is_output) {
    if (dnnl_memory_create(&o->user, user, cpu_engine, DNNL_MEMORY_NONE) != dnnl_success) return -1;
    if (dnnl_memory_desc_equal(user, inner)) {
        o->inner = o->user;
        return 0;
    }
    if (dnnl_memory_create(&o->inner, inner, cpu_engine, DNNL_MEMORY_NONE) != dnnl_success) return -1;
    o->inner_bytes = dnnl_memory_desc_get_size(inner);
    dnnl_primitive_desc_t pd;
    dnnl_status_t st = is_output ? dnnl_reorder_primitive_desc_create(&pd, inner, cpu_engine, user, cpu_engine, NULL)
                                 : dnnl_reorder_primitive_desc_create(&pd, user, cpu_engine, inner, cpu_engine, NULL);
    if (st != dnnl_success) return -1;
    st = dnnl_primitive_create(&o->reorder, pd);
    dnnl_primitive_desc_destroy(pd);
    return st == dnnl_success ? 0 : -1;
}

/* Descriptors of the caller's tensors: activations CNHW (a single channel is plain
 * NCHW, the same bytes), weights OIHW, bias X. */
static dnnl_format_tag_t activation_tag(int channels) { return channels == 1 ? dnnl_abcd : dnnl_bacd; }

static int entry_init(conv_dnnl *d, conv_entry *e, int rows) {
    const conv_dnnl_shape *s = &d->s;
    dnnl_dims_t src_dims = {rows, s->C, s->H, s->W}, w_dims = {s->O, s->C, s->k, s->k}, b_dims = {s->O},
                dst_dims = {rows, s->O, s->Ho, s->Wo}, strides = {s->stride, s->stride}, pad = {s->pad, s->pad};
    owned_md user_src = {0}, user_w = {0}, user_b = {0}, user_dst = {0}, any_src = {0}, any_w = {0}, any_dst = {0};
    dnnl_primitive_desc_t pd = NULL;
    int ok = md_tag(&user_src, 4, src_dims, activation_tag(s->C)) == dnnl_success &&
             md_tag(&user_w, 4, w_dims, dnnl_oihw) == dnnl_success &&
             (!s->has_bias || md_tag(&user_b, 1, b_dims, dnnl_x) == dnnl_success) &&
             md_tag(&user_dst, 4, dst_dims, activation_tag(s->O)) == dnnl_success &&
             md_tag(&any_src, 4, src_dims, dnnl_format_tag_any) == dnnl_success &&
             md_tag(&any_w, 4, w_dims, dnnl_format_tag_any) == dnnl_success &&
             md_tag(&any_dst, 4, dst_dims, dnnl_format_tag_any) == dnnl_success &&
             conv_forward_pd(&pd, cpu_engine, md_of(&any_src), md_of(&any_w), s->has_bias ? md_of(&user_b) : NULL,
                             md_of(&any_dst), strides, pad) == dnnl_success;
    if (ok) {
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            snprintf(d->impl, sizeof d->impl, "%s", impl);
        ok = operand_init(&e->src, md_of(&user_src), dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), 0) == 0 &&
             operand_init(&e->weights, md_of(&user_w), dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0),
                          0) == 0 &&
             operand_init(&e->dst, md_of(&user_dst), dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), 1) == 0 &&
             (!s->has_bias || dnnl_memory_create(&e->bias, md_of(&user_b), cpu_engine, DNNL_MEMORY_NONE) == dnnl_success) &&
             dnnl_primitive_create(&e->conv, pd) == dnnl_success;
    }
    if (pd) dnnl_primitive_desc_destroy(pd);
    owned_md *all[] = {&user_src, &user_w, &user_b, &user_dst, &any_src, &any_w, &any_dst};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) md_drop(all[i]);
    if (!ok) {
        entry_free(e);
        return -1;
    }
    e->rows = rows;
    return 0;
}

/* The entry for `rows`: cached, or made in the free (else least recently used) slot. */
static conv_entry *entry_for(conv_dnnl *d, int rows) {
    conv_entry *pick = &d->entry[0];
    for (int i = 0; i < CACHED_SIZES; i++) {
        conv_entry *e = &d->entry[i];
        if (e->rows == rows) return e;
        if (pick->rows && (!e->rows || e->last_use < pick->last_use)) pick = e;
    }
    entry_free(pick);
    return entry_init(d, pick, rows) == 0 ? pick : NULL;
}

/* The inner buffers are shared by a layer's entries (one runs at a time), grown to
 * the largest an entry needs. */
static int bind_scratch(conv_dnnl *d, int which, operand *o) {
    if (o->inner == o->user) return 0;
    if (o->inner_bytes > d->scratch_bytes[which]) {
        free(d->scratch[which]);
        d->scratch[which] = aligned_alloc(64, (o->inner_bytes + 63) / 64 * 64);
        d->scratch_bytes[which] = d->scratch[which] ? o->inner_bytes : 0;
        if (!d->scratch[which]) return -1;
    }
    return dnnl_memory_set_data_handle(o->inner, d->scratch[which]) == dnnl_success ? 0 : -1;
}

static int run_reorder(operand *o) {
    if (!o->reorder) return 0;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, o->user}, {DNNL_ARG_TO, o->inner}};
    return dnnl_primitive_execute(o->reorder, cpu_stream, 2, args) == dnnl_success ? 0 : -1;
}

static int run_reorder_back(operand *o) {
    if (!o->reorder) return 0;
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, o->inner}, {DNNL_ARG_TO, o->user}};
    return dnnl_primitive_execute(o->reorder, cpu_stream, 2, args) == dnnl_success ? 0 : -1;
}

int conv_dnnl_forward(conv_dnnl *d, const float *in, const float *weights, const float *bias, float *out, int rows) {
    conv_entry *e = entry_for(d, rows);
    if (!e) return -1;
    e->last_use = ++d->uses;
    if (dnnl_memory_set_data_handle(e->src.user, (void *)in) != dnnl_success ||
        dnnl_memory_set_data_handle(e->weights.user, (void *)weights) != dnnl_success ||
        dnnl_memory_set_data_handle(e->dst.user, out) != dnnl_success ||
        (e->bias && dnnl_memory_set_data_handle(e->bias, (void *)bias) != dnnl_success) ||
        bind_scratch(d, 0, &e->src) != 0 || bind_scratch(d, 1, &e->weights) != 0 || bind_scratch(d, 2, &e->dst) != 0)
        return -1;
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, e->src.inner},
                               {DNNL_ARG_WEIGHTS, e->weights.inner},
                               {DNNL_ARG_DST, e->dst.inner},
                               {DNNL_ARG_BIAS, e->bias}};
    if (run_reorder(&e->src) != 0 || run_reorder(&e->weights) != 0 ||
        dnnl_primitive_execute(e->conv, cpu_stream, e->bias ? 4 : 3, args) != dnnl_success ||
        run_reorder_back(&e->dst) != 0)
        return -1;
    return dnnl_stream_wait(cpu_stream) == dnnl_success ? 0 : -1;
}

conv_dnnl *conv_dnnl_create(const conv_dnnl_shape *shape, int rows, char *err, size_t errlen) {
    if (engine_ready() != 0) {
        snprintf(err, errlen, "oneDNN has no CPU engine here");
        return NULL;
    }
    conv_dnnl *d = calloc(1, sizeof *d);
    if (!d) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    d->s = *shape;
    if (!entry_for(d, rows)) {
        snprintf(err, errlen, "oneDNN has no convolution for %d->%d channels, %dx%d/%d pad %d on %dx%d", shape->C,
                 shape->O, shape->k, shape->k, shape->stride, shape->pad, shape->H, shape->W);
        conv_dnnl_free(d);
        return NULL;
    }
    return d;
}

void conv_dnnl_free(conv_dnnl *d) {
    if (!d) return;
    for (int i = 0; i < CACHED_SIZES; i++) entry_free(&d->entry[i]);
    for (int i = 0; i < 3; i++) free(d->scratch[i]);
    free(d);
}

const char *conv_dnnl_impl(const conv_dnnl *d) { return d->impl[0] ? d->impl : "unknown"; }

void conv_dnnl_set_threads(int threads) {
#if DDPD_HAVE_OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

int conv_dnnl_wanted(void) {
    const char *v = getenv("DDPD_CPU_CONV");
    return !v || strcmp(v, "im2col") != 0;
}

#else /* no oneDNN in this build: the im2col path does every convolution */

int conv_dnnl_wanted(void) { return 0; }
void conv_dnnl_set_threads(int threads) { (void)threads; }
conv_dnnl *conv_dnnl_create(const conv_dnnl_shape *shape, int rows, char *err, size_t errlen) {
    (void)shape, (void)rows;
    snprintf(err, errlen, "this build has no oneDNN");
    return NULL;
}
int conv_dnnl_forward(conv_dnnl *d, const float *in, const float *weights, const float *bias, float *out, int rows) {
    (void)d, (void)in, (void)weights, (void)bias, (void)out, (void)rows;
    return -1;
}
const char *conv_dnnl_impl(const conv_dnnl *d) {
    (void)d;
    return "none";
}
void conv_dnnl_free(conv_dnnl *d) { (void)d; }

#endif
