/* The "ucx" channel in a build without UCX (no libucx-dev when it was
 * built): its table says so at the first use. */
#include "common/error.h"
#include "transport/chan_ucx_query.h"

#include <unistd.h>

static adag_status_t not_built(void)
{
    return adag__error(ADAG_ERR_NOT_FOUND,
                      "ucx channel: this adag was built without UCX (install libucx-dev and "
                      "rebuild)");
}

void adag__ucx_use_net_device(const char *nic)
{
    (void)nic;
}

static adag_status_t none_create(const char *dag_name, const adag_chan_geom_t *geoms,
                                 const adag_chan_place_t *const *places, unsigned n,
                                 adag_wbuf_t *descs, adag_chan_domain_t **out)
{
    (void)dag_name, (void)geoms, (void)places, (void)n, (void)descs, (void)out;
    return not_built();
}

static adag_status_t none_export(adag_chan_domain_t *d, adag_wbuf_t *blob, int *fds,
                                 unsigned *nfds)
{
    (void)d, (void)blob, (void)fds, (void)nfds;
    return not_built();
}

static adag_status_t none_import(adag_blob_t blob, const int *fds, unsigned nfds,
                                 adag_chan_domain_t **out)
{
    (void)blob, (void)out;
    for (unsigned i = 0; i < nfds; i++)
        close(fds[i]);
    return not_built();
}

static void none_destroy(adag_chan_domain_t *d)
{
    (void)d;
}

static adag_status_t none_open(adag_chan_domain_t *d, const adag_chan_open_params_t *p,
                               adag_wbuf_t *peer_info, adag_chan_t **out)
{
    (void)d, (void)p, (void)peer_info, (void)out;
    return not_built();
}

static void none_close(adag_chan_t *ch)
{
    (void)ch;
}

static adag_status_t none_acquire(adag_chan_t *ch, uint64_t seq, int64_t deadline, void **buf)
{
    (void)ch, (void)seq, (void)deadline, (void)buf;
    return not_built();
}

static adag_status_t none_publish(adag_chan_t *ch, uint64_t seq, size_t size,
                                  const adag_tensor_meta_t *meta, adag_status_t status,
                                  const char *err)
{
    (void)ch, (void)seq, (void)size, (void)meta, (void)status, (void)err;
    return not_built();
}

static adag_status_t none_wait(adag_chan_t *ch, uint64_t seq, int64_t deadline,
                               adag_slot_view_t *view)
{
    (void)ch, (void)seq, (void)deadline, (void)view;
    return not_built();
}

static void none_release(adag_chan_t *ch, uint64_t seq)
{
    (void)ch, (void)seq;
}

static int none_ready(adag_chan_t *ch, uint64_t seq)
{
    (void)ch, (void)seq;
    return 0;
}

const adag_chan_ops_t adag_chan_ucx_ops = {
    .name = "ucx",
    .query = adag__chan_ucx_query,
    .label = adag__chan_ucx_label,
    .domain_create = none_create,
    .domain_export = none_export,
    .domain_import = none_import,
    .domain_destroy = none_destroy,
    .open = none_open,
    .close = none_close,
    .wake_all = none_close,
    .acquire = none_acquire,
    .publish = none_publish,
    .wait = none_wait,
    .release = none_release,
    .ready = none_ready,
};
