/*
 * What the data stage reads of adag's settings, and its log lines: through
 * libadag's public API only (adag_dag_config, adag_config_read,
 * adag_config_get), as libadag-data links libadag like any program
 * (data/README.md). data/settings.c.
 */
#ifndef ADAG_DATA_SETTINGS_H
#define ADAG_DATA_SETTINGS_H

#include <adag.h>

#include <stddef.h>
#include <stdint.h>

/* The settings of the runtime of the DAG `dag` feeds, else (dag NULL) the
 * environment's now; the caller releases *cfg (adag_config_release). */
adag_status_t adag__data_config(adag_dag_h dag, adag_config_h *cfg);

/* An integer setting of cfg ("ADAG_DATA_FETCHES"), into *out. */
adag_status_t adag__data_config_int(adag_config_h cfg, const char *name, int64_t *out);

/* A string setting of cfg into buf[0..len) ("" when unset). */
adag_status_t adag__data_config_text(adag_config_h cfg, const char *name, char *buf, size_t len);

/* A line on stderr, as libadag's log writes them ("[adag <pid> <level>
 * <file>:<line>] ..."), when ADAG_LOG_LEVEL (this process's, read once) is
 * at least level (1 error, 2 warn, 3 info, 4 debug). */
void adag__data_log(int level, const char *file, int line, const char *fmt, ...)
    ADAG_PRINTF(4, 5);

#define ADAG_DATA_LOG_WARN(...) adag__data_log(2, __FILE__, __LINE__, __VA_ARGS__)
#define ADAG_DATA_LOG_INFO(...) adag__data_log(3, __FILE__, __LINE__, __VA_ARGS__)

#endif
