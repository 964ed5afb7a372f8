/* Logging to stderr, filtered by ADAG_LOG_LEVEL. */
#ifndef ADAG_COMMON_LOG_H
#define ADAG_COMMON_LOG_H

#include "adag.h"

enum { ADAG_LOG_LEVEL_ERROR = 1, ADAG_LOG_LEVEL_WARN, ADAG_LOG_LEVEL_INFO, ADAG_LOG_LEVEL_DEBUG };

void adag__log(int level, const char *file, int line, const char *fmt, ...) ADAG_PRINTF(4, 5);

#define ADAG_LOG_ERROR(...) adag__log(ADAG_LOG_LEVEL_ERROR, __FILE__, __LINE__, __VA_ARGS__)
#define ADAG_LOG_WARN(...) adag__log(ADAG_LOG_LEVEL_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define ADAG_LOG_INFO(...) adag__log(ADAG_LOG_LEVEL_INFO, __FILE__, __LINE__, __VA_ARGS__)
#define ADAG_LOG_DEBUG(...) adag__log(ADAG_LOG_LEVEL_DEBUG, __FILE__, __LINE__, __VA_ARGS__)

#endif
