/* The registry of channel backends: one line per backend. The compiler
 * asks each in this order and takes the cheapest (adag__chan_choose); a
 * program names a channel's backend by its name. */
#include "transport/channel.h"

#include "common/error.h"

#include <stdio.h>
#include <string.h>

extern const adag_chan_ops_t adag_chan_self_ops;
extern const adag_chan_ops_t adag_chan_shm_ops;
extern const adag_chan_ops_t adag_chan_dev_ops;
extern const adag_chan_ops_t adag_chan_ucx_ops;

static const adag_chan_ops_t *const backends[] = {
    &adag_chan_self_ops,
    &adag_chan_shm_ops,
    &adag_chan_dev_ops,
    &adag_chan_ucx_ops,
};

#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))
_Static_assert(NBACKENDS <= ADAG_CHAN_MAX_BACKENDS, "raise ADAG_CHAN_MAX_BACKENDS");

unsigned adag__chan_nbackends(void)
{
    return NBACKENDS;
}

const adag_chan_ops_t *adag__chan_backend(uint32_t index)
{
    return index < NBACKENDS ? backends[index] : NULL;
}

const char *adag__chan_span_name(unsigned kind)
{
    static const char *const names[] = {
        [ADAG_SPAN_UCX_SEND - ADAG_SPAN_BACKEND] = "ucx send",
        [ADAG_SPAN_DEVICE_COPY - ADAG_SPAN_BACKEND] = "device copy",
    };
    unsigned i = kind - ADAG_SPAN_BACKEND;
    if (kind >= ADAG_SPAN_BACKEND && i < sizeof(names) / sizeof(names[0]) && names[i])
        return names[i];
    return adag__span_kind_name(kind);
}

const char *adag__chan_backend_name(uint32_t index)
{
    return index < NBACKENDS ? backends[index]->name : "?";
}

int adag__chan_backend_find(const char *name)
{
    for (unsigned i = 0; name && i < NBACKENDS; i++)
        if (strcmp(backends[i]->name, name) == 0)
            return (int)i;
    return -1;
}

adag_status_t adag__chan_backend_unknown(const char *chan, const char *name)
{
    char have[128] = "";
    size_t n = 0;
    for (unsigned i = 0; i < NBACKENDS && n < sizeof(have); i++)
        n += (size_t)snprintf(have + n, sizeof(have) - n, "%s%s", i ? ", " : "",
                              backends[i]->name);
    return adag__error(ADAG_ERR_PROTOCOL,
                      "channel %s: backend '%s' is not in this build (have: %s)", chan, name,
                      have);
}

void adag__chan_end_describe(const adag_chan_end_t *e, char *buf, size_t len)
{
    const char *who = e->place.who ? e->place.who : e->actor < 0 ? "the driver" : "an actor";
    char mem[48] = "host memory";
    if (e->place.kind >= 0)
        snprintf(mem, sizeof(mem), "%s:%u", adag_device_kind_name((uint32_t)e->place.kind),
                 e->place.index);
    snprintf(buf, len, "%s (%s on %s)", who, mem,
             e->node && e->node[0] ? e->node : "the driver's node");
}

adag_status_t adag__chan_choose(const adag_chan_edge_t *e, uint32_t *index)
{
    adag_chan_cost_t best = ADAG_CHAN_CANNOT;
    char whys[NBACKENDS][160];
    for (unsigned i = 0; i < NBACKENDS; i++) {
        whys[i][0] = 0;
        adag_chan_cost_t c = backends[i]->query(e, whys[i], sizeof(whys[i]));
        if (c != ADAG_CHAN_CANNOT && (best == ADAG_CHAN_CANNOT || c < best)) {
            best = c;
            *index = i;
        }
    }
    if (best != ADAG_CHAN_CANNOT)
        return ADAG_OK;
    /* "channel x (a (host memory on n) -> b (emu:0 on m)): no backend can
     * carry it: self: ...; shm: ...; ..." */
    char msg[1024];
    size_t n = 0;
    char who[160];
    adag__chan_end_describe(&e->ends[0], who, sizeof(who));
    n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s ->", who);
    for (unsigned r = 0; r < e->nreaders && n < sizeof(msg); r++) {
        adag__chan_end_describe(&e->ends[1 + r], who, sizeof(who));
        n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s %s", r ? "," : "", who);
    }
    if (e->nreaders == 0 && n < sizeof(msg))
        n += (size_t)snprintf(msg + n, sizeof(msg) - n, " no reader");
    for (unsigned i = 0; i < NBACKENDS && n < sizeof(msg); i++)
        n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s %s: %s",
                              i ? ";" : "; no backend can carry it:", backends[i]->name,
                              whys[i][0] ? whys[i] : "no");
    return adag__error(ADAG_ERR_INVALID, "channel %s: %s", e->name, msg);
}

void adag__chan_init_common(adag_chan_t *ch, const adag_chan_ops_t *ops,
                           const adag_chan_open_params_t *p)
{
    ch->ops = ops;
    ch->capacity = p->geom.capacity;
    ch->nslots = p->geom.nslots;
    ch->reader = p->reader;
    ch->abort = p->abort;
    adag__spin_init(&ch->spin, p->policy);
    snprintf(ch->name, sizeof(ch->name), "%s", p->name ? p->name : "?");
}

adag_status_t adag__chan_too_large(const adag_chan_t *ch, uint64_t seq, size_t size)
{
    return adag__error(ADAG_ERR_TOO_LARGE,
                      "channel %s: execution %llu's value is %zu bytes, larger than the slot "
                      "capacity of %zu bytes; nothing was published",
                      ch->name, (unsigned long long)seq, size, ch->capacity);
}
