#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[ADAG_ERROR_MAX];

/* Every status: its code, name and text; adag_status_str gives
 * "<name>: <text>". Indexed by -code (the codes are 0, -1, -2, ...). */
typedef struct {
    adag_status_t code;
    const char *name;
    const char *text;
    const char *str;
} status_info_t;

#define STATUS(code, text) [-(code)] = {code, #code, text, #code ": " text}
static const status_info_t status_table[] = {
    STATUS(ADAG_OK, "success"),
    STATUS(ADAG_ERR_INVALID, "invalid argument"),
    STATUS(ADAG_ERR_NO_MEMORY, "out of memory"),
    STATUS(ADAG_ERR_TIMEOUT, "timed out"),
    STATUS(ADAG_ERR_AGAIN, "would block"),
    STATUS(ADAG_ERR_METHOD, "a method failed"),
    STATUS(ADAG_ERR_ACTOR_DIED, "an actor died"),
    STATUS(ADAG_ERR_TOO_LARGE, "value larger than its slot"),
    STATUS(ADAG_ERR_IO, "system call failed"),
    STATUS(ADAG_ERR_CLOSED, "closed"),
    STATUS(ADAG_ERR_NOT_FOUND, "not found"),
    STATUS(ADAG_ERR_BUSY, "in use"),
    STATUS(ADAG_ERR_PROTOCOL, "malformed message"),
    STATUS(ADAG_ERR_INTERNAL, "internal error"),
};
#undef STATUS
_Static_assert(sizeof(status_table) / sizeof(status_table[0]) == 1 - ADAG_ERR_INTERNAL,
               "status_table has an entry for every status, ADAG_OK to ADAG_ERR_INTERNAL");

static const status_info_t *status_info(adag_status_t status)
{
    long i = -(long)status;
    if (i < 0 || i >= (long)(sizeof(status_table) / sizeof(status_table[0])) ||
        !status_table[i].name)
        return NULL;
    return &status_table[i];
}

const char *adag_status_str(adag_status_t status)
{
    const status_info_t *s = status_info(status);
    return s ? s->str : "unknown adag status";
}

const char *adag__status_name(adag_status_t status)
{
    const status_info_t *s = status_info(status);
    return s ? s->name : NULL;
}

const char *adag_last_error(void)
{
    return last_error;
}

/* Formatted into a buffer of its own first: the arguments may quote
 * adag_last_error() itself (a caller adding what it knows), which writing
 * straight into last_error would overwrite while it is read. */
adag_status_t adag_fail(adag_status_t status, const char *fmt, ...)
{
    char msg[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt ? fmt : "(no message)", ap);
    va_end(ap);
    memcpy(last_error, msg, strlen(msg) + 1);
    return status;
}
