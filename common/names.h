/* The limits of names and method shapes, wherever they come from (a class
 * registered by the driver, a module loaded by a worker, a worker's reply
 * read by the driver). */
#ifndef ADAG_COMMON_NAMES_H
#define ADAG_COMMON_NAMES_H

#include <adag.h>
#include <string.h>

/* a name of 1..ADAG_MAX_NAME-1 bytes */
static inline int adag__valid_name(const char *s)
{
    return s && *s && strnlen(s, ADAG_MAX_NAME) < ADAG_MAX_NAME;
}

/* The limits of one method: a valid name, 0..ADAG_MAX_ARGS args,
 * 1..ADAG_MAX_RETURNS returns. */
static inline int adag__method_shape_ok(const char *name, unsigned nargs, unsigned nreturns)
{
    return adag__valid_name(name) && nargs <= ADAG_MAX_ARGS && nreturns >= 1 &&
           nreturns <= ADAG_MAX_RETURNS;
}

#endif
