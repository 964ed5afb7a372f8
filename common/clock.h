/* Monotonic time and deadlines (ns). A deadline of ADAG_FOREVER never expires. */
#ifndef ADAG_COMMON_CLOCK_H
#define ADAG_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

#define ADAG_FOREVER INT64_MAX

static inline int64_t adag__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The deadline timeout_ms from now; negative timeout = forever. */
static inline int64_t adag__deadline_ms(int64_t timeout_ms)
{
    if (timeout_ms < 0)
        return ADAG_FOREVER;
    return adag__now_ns() + timeout_ms * 1000000;
}

/* Milliseconds left until deadline for poll(): -1 forever, >= 0 otherwise
 * (rounded up so a poll never returns before the deadline). */
static inline int adag__ms_left(int64_t deadline)
{
    if (deadline == ADAG_FOREVER)
        return -1;
    int64_t left = deadline - adag__now_ns();
    if (left <= 0)
        return 0;
    int64_t ms = (left + 999999) / 1000000;
    return ms > 0x7fffffff ? 0x7fffffff : (int)ms;
}

/* A deadline (not ADAG_FOREVER) as the absolute time of
 * pthread_cond_timedwait on a condition variable using CLOCK_MONOTONIC. */
static inline struct timespec adag__timespec_at(int64_t deadline)
{
    struct timespec ts = {(time_t)(deadline / 1000000000), (long)(deadline % 1000000000)};
    return ts;
}

#endif
