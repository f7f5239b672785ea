/* Every layer's gradients (weights and biases of each layer, for each activation)
 * against central finite differences of the loss, and the gradient-ready order the
 * buckets rely on (a growing prefix of the gradient buffer). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model.h"
#include "rng.h"

#define ROWS 6
#define CLASSES 4

static double loss_of(model_workspace *w, const float *params, const float *x, const uint8_t *y) {
    memcpy(w->act[0], x, sizeof(float) * ROWS * w->shape->in_dim);
    double sum = 0;
    long correct = 0;
    model_evaluate(w, params, NULL, y, ROWS, &sum, &correct);
    return sum / ROWS;
}

typedef struct {
    const model_shape *s;
    int expected_next; /* layers must be reported last to first */
    int order_ok;
} ready_log;

static void on_ready(void *arg, int layer) {
    ready_log *r = arg;
    if (layer != r->expected_next) r->order_ok = 0;
    r->expected_next = layer - 1;
}

static void check_activation(activation_kind act) {
    const int hidden[] = {7, 5};
    model_shape s;
    model_shape_mlp(&s, 9, hidden, 2, CLASSES, act);
    model_workspace w;
    REQUIRE(model_workspace_init(&w, &s, ROWS) == 0, "workspace");
    float *params = malloc(sizeof(float) * s.n_params), *grads = calloc(s.n_params, sizeof(float));
    model_init_params(&s, params, NULL, 7);
    /* Scale weights up a little so activations leave the linear region. */
    for (size_t i = 0; i < s.n_params; i++) params[i] *= 2.0f;
    float x[ROWS * 9];
    uint8_t y[ROWS];
    rng_state r;
    rng_seed(&r, 99, 0);
    for (int i = 0; i < ROWS * 9; i++) x[i] = rng_uniform(&r, -1.0f, 1.0f);
    for (int i = 0; i < ROWS; i++) y[i] = (uint8_t)(i % CLASSES);

    memcpy(w.act[0], x, sizeof x);
    double loss_sum = 0;
    long correct = 0;
    ready_log log = {&s, s.n_layers - 1, 1};
    model_pass pass = {.train = 1};
    model_forward_backward(&w, params, NULL, grads, y, ROWS, &pass, &loss_sum, &correct, on_ready, &log);
    CHECK(log.order_ok && log.expected_next == -1, "layers reported last to first, each once");
    CHECK_NEAR(loss_sum / ROWS, loss_of(&w, params, x, y), 1e-6, 1e-7, "forward_backward loss = evaluate loss");

    const float eps = 1e-2f;
    int bad = 0;
    for (size_t i = 0; i < s.n_params; i++) {
        float saved = params[i];
        params[i] = saved + eps;
        double up = loss_of(&w, params, x, y);
        params[i] = saved - eps;
        double down = loss_of(&w, params, x, y);
        params[i] = saved;
        double numeric = (up - down) / (2.0 * eps);
        double tol = 2e-3 + 2e-2 * fabs(numeric);
        if (fabs(numeric - grads[i]) > tol) {
            if (bad++ < 5)
                fprintf(stderr, "%s: param %zu: analytic %.6g numeric %.6g\n", activation_name(act), i, grads[i],
                        numeric);
        }
    }
    CHECK(bad == 0, "%s: %d of %zu gradients disagree with finite differences", activation_name(act), bad, s.n_params);
    model_workspace_free(&w);
    free(params);
    free(grads);
}

static void check_layout(void) {
    const int hidden[] = {512, 256};
    model_shape s;
    model_shape_mlp(&s, 784, hidden, 2, 10, ACT_RELU);
    size_t tensors = 784 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10;
    CHECK(s.n_params >= tensors && s.n_params - tensors < 6 * MODEL_PARAM_ALIGN,
          "parameter count %zu: the tensors' %zu and at most an alignment's padding each", s.n_params, tensors);
    CHECK(model_layer_begin(&s, 2) == 0, "last layer first in the buffer");
    CHECK(model_layer_end(&s, 2) == model_layer_begin(&s, 1), "layers are contiguous");
    CHECK(model_layer_end(&s, 0) == s.n_params, "first layer last");
    for (int l = 0; l < 3; l++) {
        const model_layer *L = &s.layer[l];
        CHECK(L->w_off % MODEL_PARAM_ALIGN == 0 && L->b_off % MODEL_PARAM_ALIGN == 0 && L->b_off >= L->w_off + L->n_w &&
                  L->w_off >= model_layer_begin(&s, l) && L->b_off + L->n_b == model_layer_end(&s, l),
              "layer %d: weight at %zu and bias at %zu, each on a 256-byte boundary, within the layer's part", l,
              L->w_off, L->b_off);
    }
    /* PyTorch's bound: 1/sqrt(fan_in) */
    float *p = malloc(sizeof(float) * s.n_params);
    for (size_t i = 0; i < s.n_params; i++) p[i] = NAN;
    model_init_params(&s, p, NULL, 42);
    size_t nonzero_padding = 0;
    for (size_t i = 0; i < s.n_params; i++) {
        int in_tensor = 0;
        for (int l = 0; l < 3; l++)
            in_tensor |= (i >= s.layer[l].w_off && i < s.layer[l].w_off + s.layer[l].n_w) ||
                         (i >= s.layer[l].b_off && i < s.layer[l].b_off + s.layer[l].n_b);
        if (!in_tensor && p[i] != 0.0f) nonzero_padding++;
    }
    CHECK(nonzero_padding == 0, "the alignment padding starts at zero: %zu elements are not", nonzero_padding);
    float bound = 1.0f / sqrtf(784.0f), max = 0;
    double mean = 0;
    for (size_t i = s.layer[0].w_off; i < s.layer[0].b_off; i++) {
        if (fabsf(p[i]) > max) max = fabsf(p[i]);
        mean += p[i];
    }
    mean /= (double)(784 * 512);
    CHECK(max <= bound && max > 0.99f * bound, "layer 0 weights within +-1/sqrt(784): max %g", max);
    CHECK(fabs(mean) < 0.01 * bound, "layer 0 weights centred: mean %g", mean);
    free(p);
}

int main(void) {
    check_layout();
    check_activation(ACT_RELU);
    check_activation(ACT_TANH);
    check_activation(ACT_GELU);
    return test_done("test_mlp_gradients");
}
