/* A slot's contents as an adag_value_t (transport/slot_value.h). */
#include "transport/slot_value.h"

#include "common/error.h"

#include <stdio.h>

adag_value_t adag__value_from_view(const adag_slot_view_t *view)
{
    adag_value_t v = adag__value_bytes(view->data, view->size);
    v.device = view->device;
    if (view->meta.dtype != ADAG_DTYPE_BYTES) {
        v.kind = ADAG_VALUE_TENSOR;
        v.dtype = (adag_dtype_t)view->meta.dtype;
        v.ndim = view->meta.ndim <= ADAG_MAX_DIMS ? view->meta.ndim : 0;
        for (uint32_t d = 0; d < v.ndim; d++)
            v.shape[d] = view->meta.shape[d];
    }
    return v;
}

adag_status_t adag__value_check_slot_meta(const adag_slot_view_t *view, const char *chan)
{
    char why[200];
    size_t bytes = 0;
    const adag_tensor_meta_t *m = &view->meta;
    if (m->dtype == ADAG_DTYPE_BYTES) {
        if (m->ndim == 0)
            return ADAG_OK;
        snprintf(why, sizeof(why), "bytes with ndim %u", m->ndim);
    } else if (adag__tensor_bytes(m->dtype, m->ndim, m->shape, &bytes, why, sizeof(why)) ==
               ADAG_TENSOR_OK) {
        if (bytes == view->size)
            return ADAG_OK;
        char t[160];
        adag__tensor_format(t, sizeof(t), m->dtype, m->ndim, m->shape);
        snprintf(why, sizeof(why), "%s is %zu bytes but the slot holds %zu", t, bytes,
                 view->size);
    }
    return adag__error(ADAG_ERR_PROTOCOL, "channel %s: malformed tensor metadata in a slot: %s",
                      chan, why);
}
