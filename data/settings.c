/*
 * The data stage's settings and log (data/settings.h), through the public
 * config API.
 */
#include "data/settings.h"

#include "common/error.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

adag_status_t adag__data_config(adag_dag_h dag, adag_config_h *cfg)
{
    return dag ? adag_dag_config(dag, cfg) : adag_config_read(cfg);
}

adag_status_t adag__data_config_int(adag_config_h cfg, const char *name, int64_t *out)
{
    char text[32];
    adag_status_t st = adag_config_get(cfg, name, text, sizeof(text), NULL);
    if (st != ADAG_OK)
        return st;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end)
        return adag__error(ADAG_ERR_INTERNAL, "setting %s is \"%s\", no integer", name, text);
    *out = v;
    return ADAG_OK;
}

adag_status_t adag__data_config_text(adag_config_h cfg, const char *name, char *buf, size_t len)
{
    return adag_config_get(cfg, name, buf, len, NULL);
}

/* ADAG_LOG_LEVEL, read once (libadag reads its own once too: both are the
 * environment's value at the first read); 1 (errors) if it cannot be read */
static int log_level = 1;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static void log_load(void)
{
    adag_config_h cfg;
    int64_t v;
    if (adag_config_read(&cfg) != ADAG_OK)
        return;
    if (adag__data_config_int(cfg, "ADAG_LOG_LEVEL", &v) == ADAG_OK)
        log_level = (int)v;
    adag_config_release(cfg);
}

void adag__data_log(int level, const char *file, int line, const char *fmt, ...)
{
    static const char *names[] = {"", "error", "warn", "info", "debug"};
    /* log_level is written in the once, read after it (pthread_once orders) */
    pthread_once(&log_once, log_load);
    if (level > log_level || level < 1 || level > 4)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one write so lines of several processes do not interleave */
    fprintf(stderr, "[adag %d %s %s:%d] %s\n", (int)getpid(), names[level], file, line, msg);
}
