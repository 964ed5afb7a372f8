/* Status codes and the per-thread message of the last failure.
 * Rule: a failure is reported once, where it is detected, with
 * adag__error(); callers above only pass the status on.
 *
 * The message lives in libadag (common/error.c) and is recorded through
 * the public adag_fail (include/adag.h): adag__error is that function
 * under its internal name, and the other reporters here are static inline
 * over adag_fail and adag_last_error. So code compiled into libadag-data
 * (data/, and the stateless common/cpuset.c, params.c, out.c it compiles
 * in too) reports into the same message through the public API only. */
#ifndef ADAG_COMMON_ERROR_H
#define ADAG_COMMON_ERROR_H

#include <adag.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ADAG_ERROR_MAX 512

/* The name of a status ("ADAG_ERR_TIMEOUT"), NULL for a value that is no
 * status. adag_status_str() gives "<name>: <text>"; both come from one
 * table in common/error.c. */
const char *adag__status_name(adag_status_t status);

/* Records "message" as this thread's last error and returns status. The
 * arguments may quote adag_last_error() (the old text is read whole before
 * the new one is stored). */
#define adag__error adag_fail

/* Like adag__error, appending ": <strerror(err)>". Returns ADAG_ERR_IO unless
 * err is ENOMEM (ADAG_ERR_NO_MEMORY). */
static inline adag_status_t adag__error_errno(int err, const char *fmt, ...) ADAG_PRINTF(2, 3);
static inline adag_status_t adag__error_errno(int err, const char *fmt, ...)
{
    char msg[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return adag_fail(err == ENOMEM ? ADAG_ERR_NO_MEMORY : ADAG_ERR_IO, "%s: %s", msg,
                     strerror(err));
}

/* Clears this thread's last error (successful public calls do not). */
static inline void adag__error_clear(void)
{
    (void)adag_fail(ADAG_OK, "%s", "");
}

/* Prefixes this thread's last error with "prefix: " (for context added by a
 * caller that knows more, e.g. which actor a control call was for). */
static inline void adag__error_prefix(const char *fmt, ...) ADAG_PRINTF(1, 2);
static inline void adag__error_prefix(const char *fmt, ...)
{
    char prefix[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    (void)adag_fail(ADAG_OK, "%s: %s", prefix, adag_last_error());
}

#endif
