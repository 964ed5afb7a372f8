/* The "ucx" channel's query (transport/chan_ucx_query.h). */
#include "transport/chan_ucx_query.h"

#include <stdio.h>

/* Between processes: the endpoints span nodes, or lie within a node other
 * than the driver's (no shared segment of the driver's reaches there).
 * A device endpoint's value is staged through its host ring
 * (chan_ucx_dev.c); a tensor declared to stay in device memory
 * (ADAG_TRANSPORT_IPC, ADAG_TRANSPORT_COMM) is not for it. */
adag_chan_cost_t adag__chan_ucx_query(const adag_chan_edge_t *e, char *why, size_t why_len)
{
    if (e->nreaders == 0 || adag__chan_edge_one_process(e))
        snprintf(why, why_len, "%s", e->nreaders ? "its endpoints are in one process"
                                                 : "nobody but its writer reads it");
    else if (!adag__chan_edge_away(e) && !e->ends[0].node[0])
        snprintf(why, why_len, "its endpoints are all on the driver's node");
    else if (adag__chan_edge_device(e) &&
             (e->transport == ADAG_TRANSPORT_IPC || e->transport == ADAG_TRANSPORT_COMM))
        snprintf(why, why_len, "it stages device values through host memory, and the tensor's "
                               "transport is %s",
                 e->transport == ADAG_TRANSPORT_IPC ? "ADAG_TRANSPORT_IPC" : "ADAG_TRANSPORT_COMM");
    else
        return ADAG_CHAN_COST_NETWORK;
    return ADAG_CHAN_CANNOT;
}

/* "staged through host memory: emu:0 -> emu:1" for a value on a device at
 * either end; nothing for host memory at both. */
void adag__chan_ucx_label(const adag_chan_geom_t *g, const adag_chan_place_t *places, unsigned r,
                         char *buf, size_t len)
{
    (void)g;
    char at[2][32];
    const adag_chan_place_t *pl[2] = {&places[0], &places[1 + r]};
    buf[0] = '\0';
    if (pl[0]->kind < 0 && pl[1]->kind < 0)
        return;
    for (int i = 0; i < 2; i++)
        if (pl[i]->kind >= 0)
            snprintf(at[i], sizeof(at[i]), "%s:%u", adag_device_kind_name((uint32_t)pl[i]->kind),
                     pl[i]->index);
        else
            snprintf(at[i], sizeof(at[i]), "host memory");
    snprintf(buf, len, "staged through host memory: %s -> %s", at[0], at[1]);
}
