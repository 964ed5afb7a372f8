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

/* A program's parts, run in order: each passes when it returns nonzero and
 * no EXPECT failed during it. Prints "<prog>: <part>: ok|FAILED" per part
 * and a summary; returns the program's exit status. */
typedef struct {
    const char *name;
    int (*run)(void);
} stress_part_t;

#include <adag.h>

static inline int stress_run_parts(const char *prog, const stress_part_t *parts, unsigned n)
{
    unsigned passed = 0;
    for (unsigned i = 0; i < n; i++) {
        int before = atomic_load(&failures);
        int ok = parts[i].run();
        EXPECT(ok, "%s (last error: %s)", parts[i].name, adag_last_error());
        ok = ok && atomic_load(&failures) == before;
        printf("%s: %s: %s\n", prog, parts[i].name, ok ? "ok" : "FAILED");
        passed += ok;
    }
    printf("%s: %u passed, %u failed\n", prog, passed, n - passed);
    return passed == n && atomic_load(&failures) == 0 ? 0 : 1;
}

#endif
