#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[ADAG_ERROR_MAX];

const char *adag_status_str(adag_status_t status)
{
    switch (status) {
    case ADAG_OK: return "ADAG_OK: success";
    case ADAG_ERR_INVALID: return "ADAG_ERR_INVALID: invalid argument";
    case ADAG_ERR_NO_MEMORY: return "ADAG_ERR_NO_MEMORY: out of memory";
    case ADAG_ERR_TIMEOUT: return "ADAG_ERR_TIMEOUT: timed out";
    case ADAG_ERR_AGAIN: return "ADAG_ERR_AGAIN: would block";
    case ADAG_ERR_METHOD: return "ADAG_ERR_METHOD: a method failed";
    case ADAG_ERR_ACTOR_DIED: return "ADAG_ERR_ACTOR_DIED: an actor died";
    case ADAG_ERR_TOO_LARGE: return "ADAG_ERR_TOO_LARGE: value larger than its slot";
    case ADAG_ERR_IO: return "ADAG_ERR_IO: system call failed";
    case ADAG_ERR_CLOSED: return "ADAG_ERR_CLOSED: closed";
    case ADAG_ERR_NOT_FOUND: return "ADAG_ERR_NOT_FOUND: not found";
    case ADAG_ERR_BUSY: return "ADAG_ERR_BUSY: in use";
    case ADAG_ERR_PROTOCOL: return "ADAG_ERR_PROTOCOL: malformed message";
    case ADAG_ERR_INTERNAL: return "ADAG_ERR_INTERNAL: internal error";
    }
    return "unknown adag status";
}

const char *adag_last_error(void)
{
    return last_error;
}

adag_status_t adag_error(adag_status_t status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return status;
}

adag_status_t adag_error_errno(int err, const char *fmt, ...)
{
    char msg[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(last_error, sizeof(last_error), "%s: %s", msg, strerror(err));
    return err == ENOMEM ? ADAG_ERR_NO_MEMORY : ADAG_ERR_IO;
}

void adag_error_clear(void)
{
    last_error[0] = '\0';
}

void adag_error_prefix(const char *fmt, ...)
{
    char prefix[ADAG_ERROR_MAX];
    char old[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof(old));
    snprintf(last_error, sizeof(last_error), "%s: %s", prefix, old);
}

adag_status_t adag_check_field_mask(const char *fn, const char *params, uint64_t mask,
                                    uint64_t known)
{
    uint64_t unknown = mask & ~known;
    if (!unknown)
        return ADAG_OK;
    return adag_error(ADAG_ERR_INVALID,
                      "%s: unknown field_mask bit 0x%llx in %s (this library knows 0x%llx)", fn,
                      (unsigned long long)(unknown & -unknown), params, (unsigned long long)known);
}
