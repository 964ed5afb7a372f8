/* A slot's contents as an adag_value_t: what a reader hands out of a
 * channel's view, and the check of the tensor metadata a slot carries
 * (written by another process, so read as untrusted). Above common/value.h
 * (values, tensor shapes), below the DAG code that reads channels. */
#ifndef ADAG_TRANSPORT_SLOT_VALUE_H
#define ADAG_TRANSPORT_SLOT_VALUE_H

#include "common/value.h"
#include "transport/channel.h"

/* The value a reader sees in a slot: bytes, or a tensor (meta.dtype != 0)
 * with its dtype and shape; its device is the view's. Every field is set. */
adag_value_t adag__value_from_view(const adag_slot_view_t *view);

adag_status_t adag__value_check_slot_meta(const adag_slot_view_t *view, const char *chan);
/* ADAG_OK if the metadata of a slot (read from memory another process can
 * write) is what a writer of this library publishes: bytes (dtype 0, ndim
 * 0), or a known tensor dtype, ndim <= ADAG_MAX_DIMS, every dimension >= 0
 * and size == the shape's bytes; else ADAG_ERR_PROTOCOL naming channel
 * `chan`. Cheap for bytes. */
static inline adag_status_t adag__value_check_slot(const adag_slot_view_t *view, const char *chan)
{
    if (view->meta.dtype == ADAG_DTYPE_BYTES && view->meta.ndim == 0)
        return ADAG_OK;
    return adag__value_check_slot_meta(view, chan);
}

#endif
