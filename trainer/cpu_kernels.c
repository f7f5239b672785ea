/* CPU reference kernels of the MLP step and the activations every model uses: see
 * cpu_kernels.h. Loops are written so the compiler vectorises them (restrict, no
 * aliasing), and every reduction runs in a fixed order so results are bit-for-bit
 * reproducible. */
#include "cpu_kernels.h"

#include <math.h>

DDPD_VECTOR_CLONES
void k_u8_to_f32(float *restrict x, const uint8_t *restrict src, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)src[i] * scale;
}

static inline float gelu(float x) { return 0.5f * x * (1.0f + erff(x * (float)M_SQRT1_2)); }
static inline float gelu_grad(float x) { return k_act_grad(ACT_GELU, 0.0f, x); }

DDPD_VECTOR_CLONES
void k_bias_act_forward(float *restrict z, float *restrict pre, const float *restrict bias,
                        int rows, int cols, activation_kind act, int apply_act) {
    for (int b = 0; b < rows; b++) {
        float *restrict row = z + (size_t)b * cols;
        for (int j = 0; j < cols; j++) row[j] += bias[j];
        if (!apply_act) continue;
        if (pre) {
            float *restrict prow = pre + (size_t)b * cols;
            for (int j = 0; j < cols; j++) prow[j] = row[j];
        }
        switch (act) {
        case ACT_RELU:
            for (int j = 0; j < cols; j++) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
            break;
        case ACT_TANH:
            for (int j = 0; j < cols; j++) row[j] = tanhf(row[j]);
            break;
        case ACT_GELU:
            for (int j = 0; j < cols; j++) row[j] = gelu(row[j]);
            break;
        }
    }
}

DDPD_VECTOR_CLONES
void k_act_forward(float *y, const float *x, size_t n, activation_kind act) {
    switch (act) {
    case ACT_RELU:
        for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case ACT_TANH:
        for (size_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
        break;
    case ACT_GELU:
        for (size_t i = 0; i < n; i++) y[i] = gelu(x[i]);
        break;
    }
}

DDPD_VECTOR_CLONES
void k_act_backward(float *restrict dz, const float *restrict out, const float *restrict pre,
                    size_t n, activation_kind act) {
    switch (act) {
    case ACT_RELU:
        for (size_t i = 0; i < n; i++) dz[i] = out[i] > 0.0f ? dz[i] : 0.0f;
        break;
    case ACT_TANH:
        for (size_t i = 0; i < n; i++) dz[i] *= 1.0f - out[i] * out[i];
        break;
    case ACT_GELU:
        for (size_t i = 0; i < n; i++) dz[i] *= gelu_grad(pre[i]);
        break;
    }
}

DDPD_VECTOR_CLONES
void k_bias_grad(float *restrict db, const float *restrict dz, int rows, int cols) {
    for (int j = 0; j < cols; j++) db[j] = 0.0f;
    for (int b = 0; b < rows; b++) {
        const float *restrict row = dz + (size_t)b * cols;
        for (int j = 0; j < cols; j++) db[j] += row[j];
    }
}

DDPD_VECTOR_CLONES
void k_softmax_xent(const float *restrict logits, const uint8_t *restrict labels, int rows, int cols,
                    float *restrict dlogits, float grad_scale, double *loss_sum, long *correct) {
    for (int b = 0; b < rows; b++) {
        const float *row = logits + (size_t)b * cols;
        int argmax = 0;
        float max = row[0];
        for (int j = 1; j < cols; j++)
            if (row[j] > max) max = row[j], argmax = j;
        float sum = 0.0f;
        for (int j = 0; j < cols; j++) sum += expf(row[j] - max);
        float log_sum = logf(sum);
        int y = labels[b];
        *loss_sum += (double)(log_sum - (row[y] - max));
        if (argmax == y) (*correct)++;
        if (dlogits) {
            float *drow = dlogits + (size_t)b * cols;
            float inv_sum = 1.0f / sum;
            for (int j = 0; j < cols; j++) drow[j] = expf(row[j] - max) * inv_sum * grad_scale;
            drow[y] -= grad_scale;
        }
    }
}
