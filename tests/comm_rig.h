/*
 * What the communicator unit suites share (tests/unit_comm.c: "comm",
 * tests/unit_comm_coll.c: "comm_coll"): COMM_TEST, which instantiates a test
 * over every backend (the host one always; nccl where it has enough CUDA
 * devices, else "skipped: <reason>"), the backend lookup that skips, the
 * check that nothing is left, and a bounded wait for a forked rank.
 */
#ifndef ADAG_TESTS_COMM_RIG_H
#define ADAG_TESTS_COMM_RIG_H

#include "common/clock.h"
#include "gpu/comm.h"
#include "gpu/device.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static uint32_t comm_rig_kinds[ADAG_COMM_KIND_COUNT];

static inline struct criterion_test_params comm_rig_kinds_params(void)
{
    for (uint32_t k = 0; k < ADAG_COMM_KIND_COUNT; k++)
        comm_rig_kinds[k] = k;
    return cr_make_param_array(uint32_t, comm_rig_kinds, ADAG_COMM_KIND_COUNT);
}

/* One test of suite `suite` per communicator kind (a backend that cannot
 * run here skips). */
#define COMM_TEST_IN(suite, name, tmo)                                                          \
    ParameterizedTestParameters(suite, name)                                                   \
    {                                                                                          \
        return comm_rig_kinds_params();                                                        \
    }                                                                                          \
    ParameterizedTest(uint32_t *kind, suite, name, .timeout = tmo)

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits for a child rank up to timeout_ms, then kills it (a failed child
 * may be stuck in a stream): its wait status. */
static inline int wait_child(pid_t pid, int timeout_ms)
{
    int status = 0;
    int64_t deadline = adag__deadline_ms(timeout_ms);
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (adag__now_ns() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        sleep_ms(5);
    }
    return status;
}

static inline const adag_comm_ops_t *host_ops(void)
{
    return adag__comm_backend(ADAG_COMM_KIND_HOST);
}

/* The backend of kind, or skips saying why it cannot run nranks ranks here. */
static inline const adag_comm_ops_t *ops_or_skip(uint32_t kind, unsigned nranks)
{
    const adag_comm_ops_t *ops = adag__comm_backend(kind);
    char why[512] = "";
    cr_assert_not_null(ops);
    if (!ops->probe(why, sizeof(why)))
        cr_skip_test("skipped: %s: %s", ops->name, why);
    const adag_device_ops_t *dev = adag__device_backend(ops->device_kind);
    unsigned n = dev->probe(why, sizeof(why));
    if (n < nranks)
        cr_skip_test("skipped: %s: %u ranks need %u %s devices, %u here", ops->name, nranks,
                     nranks, dev->name, n);
    return ops;
}

static inline void assert_counts_zero(void)
{
    for (uint32_t k = 0; k < ADAG_COMM_KIND_COUNT; k++) {
        adag_comm_counts_t c;
        adag__comm_backend(k)->counts(&c);
        cr_assert(c.comms == 0 && c.ids == 0, "%s: %llu communicators and %llu ids left",
                  adag__comm_backend(k)->name, (unsigned long long)c.comms,
                  (unsigned long long)c.ids);
    }
    adag_device_counts_t d;
    adag__device_backend(ADAG_DEV_EMULATED)->counts(NULL, &d);
    cr_assert_eq(d.streams, 0, "%llu host streams left", (unsigned long long)d.streams);
}

#endif
