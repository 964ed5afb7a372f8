/* Unit tests (suite "device_cuda"): the cuda backend (gpu/cuda.c) where it
 * has no device, as on CI: probe says why, open fails saying the same, a
 * runtime that does not load or lacks a function is named. With a GPU
 * here these skip: tests/gpu (make test-gpu) runs every op. Criterion runs
 * each test in a process of its own, so each reads ADAG_CUDART_PATH anew. */
#include "gpu/device.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

extern const adag_device_ops_t adag_device_cuda_ops;

static unsigned probe(char *why, size_t len)
{
    why[0] = '\0';
    unsigned n = adag_device_cuda_ops.probe(why, len);
    cr_assert(n > 0 || why[0], "probe found no device and said nothing");
    return n;
}

Test(device_cuda, probe_says_why_and_open_fails_the_same)
{
    char why[512];
    if (probe(why, sizeof(why)) > 0)
        cr_skip_test("skipped: a CUDA device is here (%s): make test-gpu covers it", why);
    cr_assert_eq(adag_device_cuda_ops.kind, ADAG_DEV_CUDA);
    cr_assert_str_eq(adag_device_cuda_ops.name, "cuda");
    adag_device_t *dev = (adag_device_t *)&dev;
    cr_assert_eq(adag_device_cuda_ops.open(0, &dev), ADAG_ERR_NOT_FOUND);
    cr_assert_null(dev);
    cr_assert(strstr(adag_last_error(), "cuda device 0") && strstr(adag_last_error(), why),
              "open's message does not say why: %s (probe: %s)", adag_last_error(), why);
    cr_assert_eq(adag_device_cuda_ops.probe(NULL, 0), 0, "probe without a buffer");
}

Test(device_cuda, cudart_path_that_does_not_load_is_named)
{
    cr_assert_eq(setenv("ADAG_CUDART_PATH", "/nonexistent/libcudart.so.99", 1), 0);
    char why[512];
    cr_assert_eq(probe(why, sizeof(why)), 0);
    if (strncmp(why, "not built", 9) == 0)
        cr_skip_test("skipped: %s", why);
    cr_assert(strstr(why, "/nonexistent/libcudart.so.99") && strstr(why, "ADAG_CUDART_PATH"),
              "%s", why);
}

/* libc loads but has no CUDA function: the first one looked up is named. */
Test(device_cuda, runtime_without_a_function_is_named)
{
    cr_assert_eq(setenv("ADAG_CUDART_PATH", "libc.so.6", 1), 0);
    char why[512];
    cr_assert_eq(probe(why, sizeof(why)), 0);
    if (strncmp(why, "not built", 9) == 0)
        cr_skip_test("skipped: %s", why);
    cr_assert(strstr(why, "libc.so.6 has no cudaGetErrorName"), "%s", why);
    adag_device_t *dev;
    cr_assert_eq(adag_device_cuda_ops.open(0, &dev), ADAG_ERR_NOT_FOUND);
    cr_assert(strstr(adag_last_error(), "has no cudaGetErrorName"), "%s", adag_last_error());
}
