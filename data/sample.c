/*
 * What map callbacks call (include/adag/data.h): the per-sample random
 * state and the bad-sample message. Apart from the source so that the
 * image map (data/image.c) and its fuzz target link without the threads.
 */
#include <adag/data.h>

#include "common/error.h"
#include "data/order.h"

#include <stdarg.h>
#include <stdio.h>

adag_status_t adag_data_fail(const adag_data_sample_t *sample, const char *fmt, ...)
{
    char text[ADAG_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt ? fmt : "(no message)", ap);
    va_end(ap);
    if (!sample)
        return adag__error(ADAG_ERR_INVALID, "%s", text);
    if (sample->key) /* WebDataset: the entry's key names it in the tar */
        return adag__error(ADAG_ERR_INVALID, "%s: sample %llu (key %s): %s",
                          sample->shard ? sample->shard : "?", (unsigned long long)sample->index,
                          sample->key, text);
    return adag__error(ADAG_ERR_INVALID, "%s: sample %llu: %s", sample->shard ? sample->shard : "?",
                      (unsigned long long)sample->index, text);
}

uint64_t adag_data_rand(uint64_t *rng)
{
    *rng += 0x9e3779b97f4a7c15ull;
    return adag__order_mix(*rng);
}
