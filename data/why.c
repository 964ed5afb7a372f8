/*
 * Reasons for refusing a file's bytes (data/why.h).
 */
#include "data/why.h"

#include <stdarg.h>
#include <stdio.h>

adag_status_t adag__data_refuse(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (why && why_len)
        vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
    return ADAG_ERR_INVALID;
}
