/* Unit tests over every device backend (gpu/device.h): one test per
 * device kind, a backend without a device here skipping with
 * "skipped: <reason>" (tests/unit_device.c, tests/unit_device_alias.c). */
#ifndef ADAG_TESTS_DEVICE_KINDS_H
#define ADAG_TESTS_DEVICE_KINDS_H

#include "common/clock.h"
#include "gpu/device.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <time.h>

static uint32_t device_kinds_all[ADAG_DEVICE_KIND_COUNT];

static inline struct criterion_test_params device_kinds_params(void)
{
    for (uint32_t k = 0; k < ADAG_DEVICE_KIND_COUNT; k++)
        device_kinds_all[k] = k;
    return cr_make_param_array(uint32_t, device_kinds_all, ADAG_DEVICE_KIND_COUNT);
}

/* Test `name` of `suite` once per device kind (uint32_t *kind). */
#define DEVICE_KIND_TEST(suite, name, tmo)                                                     \
    ParameterizedTestParameters(suite, name)                                                   \
    {                                                                                          \
        return device_kinds_params();                                                          \
    }                                                                                          \
    ParameterizedTest(uint32_t *kind, suite, name, .timeout = tmo)

/* Opens device `index` of the kind and binds this thread to it, or skips
 * the test saying why. */
static inline adag_device_t *device_open_or_skip(uint32_t kind, unsigned index)
{
    const adag_device_ops_t *ops = adag__device_backend(kind);
    char why[256] = "";
    if (!ops)
        cr_skip_test("skipped: device kind %u is not built into this library", kind);
    if (ops->probe(why, sizeof why) == 0)
        cr_skip_test("skipped: %s: %s", ops->name, why);
    adag_device_t *dev = NULL;
    cr_assert_eq(ops->open(index, &dev), ADAG_OK, "%s: %s", ops->name, adag_last_error());
    cr_assert_eq(ops->bind_thread(dev), ADAG_OK, "%s", adag_last_error());
    return dev;
}

/* The monotonic clock in ms, and a sleep of ms (the device tests' timing). */
static inline double now_ms(void)
{
    return adag__now_ns() / 1e6;
}

static inline void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif
