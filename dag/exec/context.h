/*
 * One process's part of a running DAG: its abort word, the channel
 * backends' domains and every channel endpoint opened in this process (the
 * driver's own and its thread actors' in the driver; the loop's in a
 * worker). Nothing here is shared between processes: each backend decides
 * how its channels are shared (the shm domain is a mapped memfd), and
 * aborting the DAG in another process is a control message (ABORT_DAG)
 * whose handler calls adag__ctx_abort there.
 */
#ifndef ADAG_DAG_CONTEXT_H
#define ADAG_DAG_CONTEXT_H

#include "transport/channel.h"
#include "transport/wire.h"

#include <adag.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct {
    /* 0 while running, else -status of the failure. Every channel wait of
     * the DAG in this process watches it; stored seq_cst (part of the event
     * handshake, common/event.h) before every endpoint is woken. */
    _Atomic uint32_t abort;
    adag_chan_domain_t *domains[ADAG_CHAN_MAX_BACKENDS]; /* by backend index */
    pthread_mutex_t lock; /* the endpoint list (abort may come from any thread) */
    adag_chan_t **eps;
    unsigned neps, cap;
    /* the communicators its endpoints use (dag/exec/actor_comm.h): one
     * reference each, given back after the endpoints are closed */
    struct adag_actor_comm **comms;
    unsigned ncomms;
    /* called by adag__ctx_abort, under lock, after the abort word is set:
     * each running loop with collectives on shared communicators decides
     * which of them its failure leaves broken (dag/exec/loop_collective.c) */
    struct adag_ctx_abort_hook {
        void (*fn)(void *arg, int failed);
        void *arg;
    } *hooks;
    unsigned nhooks;
} adag_dag_ctx_t;

void adag__ctx_init(adag_dag_ctx_t *ctx);
/* Closes every endpoint, then gives back the communicators, then closes
 * every domain. */
void adag__ctx_destroy(adag_dag_ctx_t *ctx);
/* Keeps a reference from adag__actor_comm_begin until adag__ctx_destroy
 * (taken also on failure: then given back at once). */
adag_status_t adag__ctx_hold_comm(adag_dag_ctx_t *ctx, struct adag_actor_comm *e);

/* The driver: creates the domain of every backend among kinds[0..n)
 * (registry indices, transport/channel.h) whose
 * ops have domains, laying out channel i (geoms[i], its endpoints'
 * places[i]: see domain_create; places may be NULL) and appending its
 * descriptor to descs[i]. */
adag_status_t adag__ctx_create_domains(adag_dag_ctx_t *ctx, const char *dag_name,
                                      const uint32_t *kinds, const adag_chan_geom_t *geoms,
                                      const adag_chan_place_t *const *places, unsigned n,
                                      adag_wbuf_t *descs);
/* What another process needs to attach the domains (each named by its
 * backend's name): appended to out, fds
 * (still owned by the context) to fds[*nfds..max). */
adag_status_t adag__ctx_export_domains(adag_dag_ctx_t *ctx, adag_wbuf_t *out, int *fds,
                                      unsigned *nfds, unsigned max);
/* The same for the kinds in the mask only (bit k: the backend of index k). */
adag_status_t adag__ctx_export_domains_of(adag_dag_ctx_t *ctx, uint32_t kinds, adag_wbuf_t *out,
                                         int *fds, unsigned *nfds, unsigned max);
/* Attaches exported domains; takes every fd (also on failure). On failure
 * nothing stays attached and every fd given is closed. */
adag_status_t adag__ctx_import_domains(adag_dag_ctx_t *ctx, adag_blob_t blob, int *fds,
                                      unsigned nfds);
/* Bytes the domains hold. */
size_t adag__ctx_domain_bytes(const adag_dag_ctx_t *ctx);

/* Opens an endpoint of a `kind` channel on this process's domain of that
 * kind, watching the context's abort word, and records it (closed by
 * adag__ctx_destroy). */
adag_status_t adag__ctx_open(adag_dag_ctx_t *ctx, uint32_t kind, adag_chan_open_params_t *p,
                            adag_wbuf_t *peer_info, adag_chan_t **out);

/* Registers (until removed) a hook adag__ctx_abort calls. */
adag_status_t adag__ctx_add_abort_hook(adag_dag_ctx_t *ctx, void (*fn)(void *arg, int failed),
                                      void *arg);
void adag__ctx_remove_abort_hook(adag_dag_ctx_t *ctx, void *arg);
/* Sets the abort word to -status unless it is set already, wakes every
 * endpoint and, on a failure (not ADAG_ERR_CLOSED, a plain destroy),
 * aborts the unshared communicators and runs the hooks. Returns nonzero if
 * this call set it. */
int adag__ctx_abort(adag_dag_ctx_t *ctx, adag_status_t status);

static inline int adag__ctx_aborted(adag_dag_ctx_t *ctx)
{
    return atomic_load_explicit(&ctx->abort, memory_order_seq_cst) != 0;
}

#endif
