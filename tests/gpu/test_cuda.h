/*
 * test-cuda's harness (tests/gpu/test_cuda.c: the runner and the tests of
 * every op; tests/gpu/cuda_values.c: the value ops): the backend, the
 * outcomes and the CHECK macros of a test function, which ends at its
 * `out:` label with rc FAIL when a check fails.
 */
#ifndef ADAG_TESTS_GPU_TEST_CUDA_H
#define ADAG_TESTS_GPU_TEST_CUDA_H

#include "gpu/device.h"

#include <adag.h>
#include <stdio.h>
#include <stddef.h>

extern const adag_device_ops_t adag_device_cuda_ops;
#define O (&adag_device_cuda_ops)

enum { PASS = 0, FAIL = 1, SKIP = 77 };

/* A test that returns SKIP says why here. */
extern char skip_reason[256];
/* "ipc child: " in a child process, for its messages */
extern const char *who;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %sline %d: %s: ", who, __LINE__, #cond);                            \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            rc = FAIL;                                                                             \
            goto out;                                                                              \
        }                                                                                          \
    } while (0)

/* An op that must succeed: the failure shows its status and message. */
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        adag_status_t st_ = (expr);                                                                \
        CHECK(st_ == ADAG_OK, "%s: %s", adag_status_str(st_), adag_last_error());                  \
    } while (0)

void sleep_ms(int ms);
double now_ms(void);
/* Whether dev's counts are all zero (else says which are not). */
int counts_zero(adag_device_t *dev);
/* Reads or writes all n bytes: 0, or -1. */
int full_io(int fd, void *buf, size_t n, int writing);

/* The value ops (tests/gpu/cuda_values.c). */
int test_values_order(adag_device_t *dev);
int test_values_abort(adag_device_t *dev);
int test_values_in_graphs(adag_device_t *dev);
int test_values_ipc(adag_device_t *dev);
/* The child of test_values_ipc (`--values-child`). */
int values_child(void);

#endif
