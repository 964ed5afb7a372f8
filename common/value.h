/* adag_value_t inside the library: building the values it hands out and
 * checking the ones it is given. */
#ifndef ADAG_COMMON_VALUE_H
#define ADAG_COMMON_VALUE_H

#include <adag.h>

/* A host-bytes value viewing data[0..size): every other field zero, so a
 * caller never reads stale tensor fields from a reused struct. */
static inline adag_value_t adag_value_bytes(const void *data, size_t size)
{
    adag_value_t v = {.data = data, .size = size, .kind = ADAG_VALUE_BYTES};
    return v;
}

/* ADAG_OK if value is one this library accepts as an input (host bytes, see
 * adag_value_t), else ADAG_ERR_INVALID: "<fn>: input <i>: <what is wrong>". */
adag_status_t adag_value_check_input(const adag_value_t *value, const char *fn, unsigned i);

#endif
