/* What the "ucx" channel can carry: one answer for builds with UCX
 * (transport/chan_ucx.c) and without (transport/chan_ucx_none.c, which
 * then says "built without UCX" at first use), so that a DAG compiles to
 * the same backends in both. */
#ifndef ADAG_TRANSPORT_CHAN_UCX_QUERY_H
#define ADAG_TRANSPORT_CHAN_UCX_QUERY_H

#include "transport/channel.h"

adag_chan_cost_t adag__chan_ucx_query(const adag_chan_edge_t *e, char *why, size_t why_len);
/* Its DOT label (ops label): how a device value is staged. */
void adag__chan_ucx_label(const adag_chan_geom_t *g, const adag_chan_place_t *places, unsigned r,
                         char *buf, size_t len);

#endif
