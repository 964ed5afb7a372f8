/*
 * The data stage's parsers say why they refuse into a caller's buffer
 * (they log nothing and keep no state): data/why.c.
 */
#ifndef ADAG_DATA_WHY_H
#define ADAG_DATA_WHY_H

#include <adag.h>

#include <stddef.h>

/* Formats the reason into why (if given) and returns ADAG_ERR_INVALID. */
adag_status_t adag__data_refuse(char *why, size_t why_len, const char *fmt, ...)
    ADAG_PRINTF(3, 4);

#endif
