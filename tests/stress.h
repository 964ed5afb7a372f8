/*
 * The tiny harness of the stand-alone TSan stress programs
 * (tests/stress_*.c; Criterion cannot run under TSan): EXPECT counts a
 * failure and says where, and each program exits nonzero if any.
 */
#ifndef ADAG_TESTS_STRESS_H
#define ADAG_TESTS_STRESS_H

#include <stdatomic.h>
#include <stdio.h>

static _Atomic int failures;

#define EXPECT(cond, ...)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                             \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n");                                                           \
            atomic_fetch_add(&failures, 1);                                                  \
        }                                                                                    \
    } while (0)

#endif
