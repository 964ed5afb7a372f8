/*
 * Installing a compiled DAG on its actors: PREPARE (each actor opens its
 * endpoints and answers with their peer info), the peers assembled per
 * channel and the driver's endpoints connected, CONNECT, START; each step
 * on every actor at once (adag__actors_step).
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/settings.h"
#include "dag/driver/dag.h"
#include "transport/wire.h"

#include <stdlib.h>
#include <string.h>

/* The peer info of endpoint `who` (-1: the driver) of DAG channel c, from
 * the answers to PREPARE. */
static adag_blob_t endpoint_info(adag_dag_h dag, unsigned c, int who)
{
    adag_blob_t none = {NULL, 0};
    if (who < 0)
        return (adag_blob_t){dag->plan.chans[c].driver_info.data, dag->plan.chans[c].driver_info.len};
    const adag_dag_actor_t *da = &dag->run.actors[who];
    adag_rbuf_t rb = {da->infos.data, da->infos.len, 0, 0};
    uint32_t n = adag__rbuf_u32(&rb);
    for (uint32_t i = 0; i < n && i < da->prog.nchans && !rb.failed; i++) {
        adag_blob_t b;
        b.data = adag__rbuf_bytes(&rb, &b.len);
        if (!rb.failed && da->prog.chans[i].id == c)
            return b;
    }
    return none;
}

/* CONNECT's payload per actor: for each of its channels whose backend
 * connects, the peer info of the writer and of every reader; and the
 * driver's endpoints connect here. */
static adag_status_t assemble_peers(adag_dag_h dag)
{
    for (unsigned ai = 0; ai < dag->run.nactors; ai++) {
        adag_dag_actor_t *da = &dag->run.actors[ai];
        adag_rbuf_t rb = {da->infos.data, da->infos.len, 0, 0};
        if (adag__rbuf_u32(&rb) != da->prog.nchans || rb.failed)
            return adag__error(ADAG_ERR_PROTOCOL,
                              "adag_graph_compile: actor %s answered PREPARE with peer info for "
                              "the wrong number of channels",
                              da->actor->name);
        adag__wbuf_free(&da->peers);
        adag__wbuf_u32(&da->peers, da->prog.nchans);
        for (uint32_t i = 0; i < da->prog.nchans; i++) {
            const adag_dag_chan_t *dc = &dag->plan.chans[da->prog.chans[i].id];
            if (!adag__chan_backend(dc->backend)->connect) {
                adag__wbuf_u32(&da->peers, 0);
                continue;
            }
            adag__wbuf_u32(&da->peers, 1 + dc->nreaders);
            adag_blob_t b = endpoint_info(dag, da->prog.chans[i].id, dc->writer);
            adag__wbuf_bytes(&da->peers, b.data, b.len);
            for (unsigned r = 0; r < dc->nreaders; r++) {
                b = endpoint_info(dag, da->prog.chans[i].id, dc->readers[r]);
                adag__wbuf_bytes(&da->peers, b.data, b.len);
            }
        }
        if (da->peers.failed)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    }
    return ADAG_OK;
}

/* The driver's own endpoints connect to their peers (thread actors'
 * endpoints connect in their CONNECT step). */
static adag_status_t connect_driver(adag_dag_h dag)
{
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        const adag_dag_chan_t *dc = &dag->plan.chans[c];
        const adag_chan_ops_t *ops = adag__chan_backend(dc->backend);
        adag_chan_t *mine = NULL;
        if (!ops->connect)
            continue;
        for (unsigned f = 0; f < dag->plan.ninputs; f++)
            if (dag->ends.input_chan[f] == c)
                mine = dag->ends.inputs[f];
        for (unsigned e = 0; e < dag->ends.nouts; e++)
            if (dag->ends.out_chan[e] == c)
                mine = dag->ends.outs[e];
        if (c == dag->plan.start_chan)
            mine = dag->ends.start;
        if (!mine)
            continue;
        adag_blob_t *peers = calloc(1 + dc->nreaders, sizeof(*peers));
        if (!peers)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        peers[0] = endpoint_info(dag, c, dc->writer);
        for (unsigned r = 0; r < dc->nreaders; r++)
            peers[1 + r] = endpoint_info(dag, c, dc->readers[r]);
        adag_status_t st = ops->connect(mine, peers, 1 + dc->nreaders);
        free(peers);
        if (st != ADAG_OK) {
            adag__error_prefix("adag_graph_compile: the driver's endpoint");
            return st;
        }
    }
    return ADAG_OK;
}

/* Runs one install step on every actor at once; the first failure (in
 * actor order) is the result. */
static adag_status_t step_all(adag_dag_h dag, adag_step_t step)
{
    unsigned *ais = calloc(dag->run.nactors + 1, sizeof(*ais));
    adag_status_t *st = calloc(dag->run.nactors + 1, sizeof(*st));
    char (*why)[ADAG_ERROR_MAX] = calloc(dag->run.nactors + 1, sizeof(*why));
    adag_status_t result = ADAG_OK;
    if (!ais || !st || !why) {
        result = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        goto out;
    }
    for (unsigned i = 0; i < dag->run.nactors; i++)
        ais[i] = i;
    adag__actors_step(&dag->run, ais, dag->run.nactors, step,
                     adag__deadline_ms(dag->run.rt->settings.control_timeout_ms), st, why);
    for (unsigned i = 0; i < dag->run.nactors && result == ADAG_OK; i++)
        if (st[i] != ADAG_OK)
            result = adag__error(st[i], "adag_graph_compile: %s", why[i]);
out:
    free(ais);
    free(st);
    free(why);
    return result;
}

adag_status_t adag__dag_install(adag_dag_h dag)
{
    adag_status_t st;
    if ((st = step_all(dag, ADAG_STEP_PREPARE)) != ADAG_OK ||
        (st = assemble_peers(dag)) != ADAG_OK || (st = connect_driver(dag)) != ADAG_OK ||
        (st = step_all(dag, ADAG_STEP_CONNECT)) != ADAG_OK)
        return st;
    return step_all(dag, ADAG_STEP_START);
}
