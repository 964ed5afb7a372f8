/*
 * The "stage" actor class of examples/modules/stages.c, shared with the
 * drivers that use it: the init bytes and the function one stage computes
 * (so a driver can compute the expected output itself and compare).
 */
#ifndef ADAG_EXAMPLE_STAGES_H
#define ADAG_EXAMPLE_STAGES_H

#include <stddef.h>
#include <stdint.h>

/* The init bytes of a "stage" actor. */
typedef struct {
    int32_t index; /* position in the pipeline: 0, 1, ... */
    float scale;   /* weight applied to the input */
} stage_init_t;

/* Extra refinement rounds per element: the knob that sets how long a stage
 * computes (about 30-40 us for a 16 KiB batch on a current x86 core). */
#define STAGE_ROUNDS 4

/* One element: y ~= tanh(x * scale + index), via a rational approximation of
 * tanh, then STAGE_ROUNDS damped fixed-point rounds of v = t / (1 + v^2/10)
 * (stable, and y stays a smooth function of x). */
static inline float stage_element(float x, float scale, float bias)
{
    float z = x * scale + bias;
    z = z > 3.0f ? 3.0f : (z < -3.0f ? -3.0f : z);
    float t = z * (27.0f + z * z) / (27.0f + 9.0f * z * z);
    float v = t;
    for (int k = 0; k < STAGE_ROUNDS; k++)
        v = 0.5f * (v + t / (1.0f + 0.1f * v * v));
    return v;
}

/* A whole batch of n floats; out may equal in. */
static inline void stage_compute(const float *in, float *out, size_t n, int32_t index, float scale)
{
    for (size_t i = 0; i < n; i++)
        out[i] = stage_element(in[i], scale, (float)index);
}

#endif
