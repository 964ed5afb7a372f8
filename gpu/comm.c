/* The table of communicator backends (gpu/comm.h), by kind, by name and by
 * the kind of device their ranks are on. */
#include "gpu/comm.h"

#include <string.h>

extern const adag_comm_ops_t adag_comm_host_ops;
extern const adag_comm_ops_t adag_comm_nccl_ops;

static const adag_comm_ops_t *const backends[ADAG_COMM_KIND_COUNT] = {
    [ADAG_COMM_KIND_HOST] = &adag_comm_host_ops,
    [ADAG_COMM_KIND_NCCL] = &adag_comm_nccl_ops,
};

const adag_comm_ops_t *adag__comm_backend(uint32_t kind)
{
    return kind < ADAG_COMM_KIND_COUNT ? backends[kind] : NULL;
}

const adag_comm_ops_t *adag__comm_backend_named(const char *name)
{
    for (uint32_t k = 0; name && k < ADAG_COMM_KIND_COUNT; k++)
        if (backends[k] && strcmp(backends[k]->name, name) == 0)
            return backends[k];
    return NULL;
}

const adag_comm_ops_t *adag__comm_backend_for_device(adag_device_kind_t device_kind)
{
    for (uint32_t k = 0; k < ADAG_COMM_KIND_COUNT; k++)
        if (backends[k] && backends[k]->device_kind == device_kind)
            return backends[k];
    return NULL;
}
