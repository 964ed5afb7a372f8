/* RDMA devices and the state of their ports, from libibverbs. */
#include "gpu/topo.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <string.h>

void adag__rdma_scan(adag_rdma_dev_t *devs, unsigned *n, char *note, size_t note_len)
{
    int count = 0;
    *n = 0;
    errno = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    if (!list) {
        snprintf(note, note_len, "libibverbs lists none: %s", strerror(errno ? errno : ENODEV));
        return;
    }
    for (int i = 0; i < count && *n < ADAG_TOPO_MAX_RDMA; i++) {
        adag_rdma_dev_t *d = &devs[(*n)++];
        memset(d, 0, sizeof(*d));
        snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(list[i]));
        struct ibv_context *ctx = ibv_open_device(list[i]);
        struct ibv_device_attr attr;
        if (!ctx)
            continue;
        if (ibv_query_device(ctx, &attr) == 0) {
            d->nports = attr.phys_port_cnt < ADAG_TOPO_MAX_PORTS ? attr.phys_port_cnt
                                                                 : ADAG_TOPO_MAX_PORTS;
            for (unsigned p = 0; p < d->nports; p++) {
                struct ibv_port_attr pa;
                d->active[p] = ibv_query_port(ctx, (uint8_t)(p + 1), &pa) == 0 &&
                               pa.state == IBV_PORT_ACTIVE;
            }
        }
        ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (*n == 0)
        snprintf(note, note_len, "libibverbs lists none");
    else
        snprintf(note, note_len, "libibverbs lists %u", *n);
}
