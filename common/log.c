#include "common/log.h"

#include "common/settings.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void adag__log(int level, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"", "error", "warn", "info", "debug"};
    if (level > adag__process_settings()->log_level)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one write so lines of several processes do not interleave */
    fprintf(stderr, "[adag %d %s %s:%d] %s\n", (int)getpid(), names[level], file, line, msg);
}
