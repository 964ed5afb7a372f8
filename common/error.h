/* Status codes and the per-thread message of the last failure.
 * Rule: a failure is reported once, where it is detected, with
 * adag__error(); callers above only pass the status on. */
#ifndef ADAG_COMMON_ERROR_H
#define ADAG_COMMON_ERROR_H

#include <adag.h>

#define ADAG_ERROR_MAX 512

/* The name of a status ("ADAG_ERR_TIMEOUT"), NULL for a value that is no
 * status. adag_status_str() gives "<name>: <text>"; both come from one
 * table in common/error.c. */
const char *adag__status_name(adag_status_t status);

/* Records "message" as this thread's last error and returns status. The
 * arguments may quote adag_last_error() (the old text is read whole before
 * the new one is stored). */
adag_status_t adag__error(adag_status_t status, const char *fmt, ...) ADAG_PRINTF(2, 3);

/* Like adag__error, appending ": <strerror(err)>". Returns ADAG_ERR_IO unless
 * err is ENOMEM (ADAG_ERR_NO_MEMORY). */
adag_status_t adag__error_errno(int err, const char *fmt, ...) ADAG_PRINTF(2, 3);

/* Clears this thread's last error (successful public calls do not). */
void adag__error_clear(void);

/* Prefixes this thread's last error with "prefix: " (for context added by a
 * caller that knows more, e.g. which actor a control call was for). */
void adag__error_prefix(const char *fmt, ...) ADAG_PRINTF(1, 2);

#endif
