/* The table of device backends, by kind. */
#include "gpu/device.h"

#include <unistd.h>

extern const adag_device_ops_t adag_device_host_ops;
extern const adag_device_ops_t adag_device_cuda_ops;

static const adag_device_ops_t *const backends[ADAG_DEVICE_KIND_COUNT] = {
    [ADAG_DEVICE_KIND_HOST] = &adag_device_host_ops,
    [ADAG_DEVICE_KIND_CUDA] = &adag_device_cuda_ops,
};

const adag_device_ops_t *adag_device_backend(uint32_t kind)
{
    return kind < ADAG_DEVICE_KIND_COUNT ? backends[kind] : NULL;
}

const char *adag_device_kind_name(uint32_t kind)
{
    const adag_device_ops_t *ops = adag_device_backend(kind);
    return ops ? ops->name : "?";
}

void adag_dev_handle_close(adag_dev_handle_t *h)
{
    for (unsigned i = 0; i < h->nfds && i < ADAG_DEVICE_MAX_FDS; i++) {
        if (h->fds[i] >= 0)
            close(h->fds[i]);
        h->fds[i] = -1;
    }
    h->nfds = 0;
}
