/* What the "ucx" channel can carry, and the process-wide UCX settings
 * adag chooses: one answer for builds with UCX (transport/chan_ucx.c,
 * transport/ucx_domain.c) and without (transport/chan_ucx_none.c, which
 * then says "built without UCX" at first use), so that a DAG compiles to
 * the same backends in both. */
#ifndef ADAG_TRANSPORT_CHAN_UCX_QUERY_H
#define ADAG_TRANSPORT_CHAN_UCX_QUERY_H

#include "transport/channel.h"

adag_chan_cost_t adag__chan_ucx_query(const adag_chan_edge_t *e, char *why, size_t why_len);
/* Its DOT label (ops label): how a device value is staged. */
void adag__chan_ucx_label(const adag_chan_geom_t *g, const adag_chan_place_t *places, unsigned r,
                         char *buf, size_t len);

/* The network device this process's UCP context uses (UCX's NET_DEVICES:
 * "mlx5_0:1", "eth0"), unless the user set UCX_NET_DEVICES (the user's
 * choice wins); NULL or "": UCX's own choice. Applied (ucp_config_modify)
 * when the context is made, by the process's first UCX domain: a worker
 * calls it with its actor's placement (adag__place_nic) before the actor
 * runs. Without UCX: nothing. */
void adag__ucx_use_net_device(const char *nic);

#endif
