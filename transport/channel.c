/* The table of channel backends, by kind. */
#include "transport/channel.h"

#include "common/error.h"

#include <stdio.h>
#include <string.h>

extern const adag_chan_ops_t adag_chan_self_ops;
extern const adag_chan_ops_t adag_chan_shm_ops;
extern const adag_chan_ops_t adag_chan_dev_ops;
extern const adag_chan_ops_t adag_chan_ucx_ops;

static const adag_chan_ops_t *const backends[ADAG_CHAN_NKINDS] = {
    [ADAG_CHAN_SELF] = &adag_chan_self_ops,
    [ADAG_CHAN_SHM] = &adag_chan_shm_ops,
    [ADAG_CHAN_DEVICE] = &adag_chan_dev_ops,
    [ADAG_CHAN_UCX] = &adag_chan_ucx_ops,
};

const adag_chan_ops_t *adag_chan_backend(uint32_t kind)
{
    return kind < ADAG_CHAN_NKINDS ? backends[kind] : NULL;
}

const char *adag_chan_kind_name(uint32_t kind)
{
    const adag_chan_ops_t *ops = adag_chan_backend(kind);
    return ops ? ops->name : "?";
}

void adag_chan_init_common(adag_chan_t *ch, const adag_chan_ops_t *ops,
                           const adag_chan_open_params_t *p)
{
    ch->ops = ops;
    ch->capacity = p->geom.capacity;
    ch->nslots = p->geom.nslots;
    ch->reader = p->reader;
    ch->abort = p->abort;
    adag_spin_init(&ch->spin, p->policy);
    snprintf(ch->name, sizeof(ch->name), "%s", p->name ? p->name : "?");
}

adag_status_t adag_chan_too_large(const adag_chan_t *ch, uint64_t seq, size_t size)
{
    return adag_error(ADAG_ERR_TOO_LARGE,
                      "channel %s: execution %llu's value is %zu bytes, larger than the slot "
                      "capacity of %zu bytes; nothing was published",
                      ch->name, (unsigned long long)seq, size, ch->capacity);
}
