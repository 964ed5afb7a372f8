#include "common/cpuset.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static int parse_cpu(const char **p, long *out)
{
    char *end;
    if (**p < '0' || **p > '9')
        return -1;
    errno = 0;
    long v = strtol(*p, &end, 10);
    if (errno || v < 0 || v >= CPU_SETSIZE)
        return -1;
    *p = end;
    *out = v;
    return 0;
}

int adag__cpulist_parse(const char *text, cpu_set_t *out, const char **bad)
{
    const char *p = text;
    CPU_ZERO(out);
    if (!p || !*p)
        goto fail;
    for (;;) {
        const char *item = p;
        long lo, hi;
        if (parse_cpu(&p, &lo)) {
            p = item;
            goto fail;
        }
        hi = lo;
        if (*p == '-') {
            p++;
            if (parse_cpu(&p, &hi) || hi < lo) {
                p = item;
                goto fail;
            }
        }
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, out);
        if (*p == '\0')
            return 0;
        if (*p != ',' || p[1] == '\0') {
            p = *p == ',' ? p : item;
            goto fail;
        }
        p++;
    }
fail:
    if (bad)
        *bad = p ? p : "";
    CPU_ZERO(out);
    return -1;
}

void adag__cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t pos = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int hi = c;
        while (hi + 1 < CPU_SETSIZE && CPU_ISSET(hi + 1, set))
            hi++;
        int n = hi == c ? snprintf(buf + pos, len - pos, "%s%d", pos ? "," : "", c)
                        : snprintf(buf + pos, len - pos, "%s%d-%d", pos ? "," : "", c, hi);
        if (n < 0 || (size_t)n >= len - pos) {
            buf[len - 1] = '\0';
            return;
        }
        pos += (size_t)n;
        c = hi;
    }
}

void adag__cpus_allowed(cpu_set_t *out)
{
    if (sched_getaffinity(0, sizeof(*out), out) != 0 || CPU_COUNT(out) == 0) {
        CPU_ZERO(out);
        CPU_SET(0, out);
    }
}
