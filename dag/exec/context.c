#include "dag/exec/context.h"

#include "common/error.h"
#include "dag/exec/actor_comm.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void adag__ctx_init(adag_dag_ctx_t *ctx)
{
    memset(ctx, 0, sizeof(*ctx));
    atomic_init(&ctx->abort, 0);
    pthread_mutex_init(&ctx->lock, NULL);
}

void adag__ctx_destroy(adag_dag_ctx_t *ctx)
{
    for (unsigned i = 0; i < ctx->neps; i++)
        ctx->eps[i]->ops->close(ctx->eps[i]);
    free(ctx->eps);
    ctx->eps = NULL;
    ctx->neps = ctx->cap = 0;
    for (unsigned i = 0; i < ctx->ncomms; i++)
        adag__actor_comm_put(ctx->comms[i]);
    free(ctx->comms);
    ctx->comms = NULL;
    ctx->ncomms = 0;
    free(ctx->hooks);
    ctx->hooks = NULL;
    ctx->nhooks = 0;
    for (unsigned k = 0; k < adag__chan_nbackends(); k++) {
        if (ctx->domains[k])
            ctx->domains[k]->ops->domain_destroy(ctx->domains[k]);
        ctx->domains[k] = NULL;
    }
    pthread_mutex_destroy(&ctx->lock);
}

adag_status_t adag__ctx_hold_comm(adag_dag_ctx_t *ctx, struct adag_actor_comm *e)
{
    pthread_mutex_lock(&ctx->lock);
    struct adag_actor_comm **c = realloc(ctx->comms, (ctx->ncomms + 1) * sizeof(*c));
    if (c) {
        ctx->comms = c;
        ctx->comms[ctx->ncomms++] = e;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (c)
        return ADAG_OK;
    adag__actor_comm_put(e);
    return adag__error(ADAG_ERR_NO_MEMORY, "communicator: out of memory");
}

adag_status_t adag__ctx_create_domains(adag_dag_ctx_t *ctx, const char *dag_name,
                                      const uint32_t *kinds, const adag_chan_geom_t *geoms,
                                      const adag_chan_place_t *const *places, unsigned n,
                                      adag_wbuf_t *descs)
{
    adag_chan_geom_t *g = calloc(n + 1, sizeof(*g));
    const adag_chan_place_t **p = calloc(n + 1, sizeof(*p));
    adag_wbuf_t *d = calloc(n + 1, sizeof(*d));
    unsigned *which = calloc(n + 1, sizeof(*which));
    adag_status_t st = ADAG_OK;
    if (!g || !p || !d || !which) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "DAG %s: out of memory", dag_name);
        goto out;
    }
    for (uint32_t k = 0; k < adag__chan_nbackends() && st == ADAG_OK; k++) {
        const adag_chan_ops_t *ops = adag__chan_backend(k);
        if (!ops->domain_create)
            continue;
        unsigned m = 0;
        for (unsigned i = 0; i < n; i++)
            if (kinds[i] == k) {
                which[m] = i;
                p[m] = places ? places[i] : NULL;
                g[m++] = geoms[i];
            }
        if (m == 0)
            continue;
        memset(d, 0, m * sizeof(*d));
        st = ops->domain_create(dag_name, g, p, m, d, &ctx->domains[k]);
        for (unsigned j = 0; j < m; j++) {
            if (st == ADAG_OK) {
                if (d[j].failed)
                    st = adag__error(ADAG_ERR_NO_MEMORY, "DAG %s: out of memory", dag_name);
                else
                    adag__wbuf_raw(&descs[which[j]], d[j].data, d[j].len);
            }
            adag__wbuf_free(&d[j]);
        }
    }
out:
    free(g);
    free(p);
    free(d);
    free(which);
    return st;
}

adag_status_t adag__ctx_export_domains(adag_dag_ctx_t *ctx, adag_wbuf_t *out, int *fds,
                                      unsigned *nfds, unsigned max)
{
    return adag__ctx_export_domains_of(ctx, UINT32_MAX, out, fds, nfds, max);
}

adag_status_t adag__ctx_export_domains_of(adag_dag_ctx_t *ctx, uint32_t kinds, adag_wbuf_t *out,
                                         int *fds, unsigned *nfds, unsigned max)
{
    uint32_t n = 0;
    for (unsigned k = 0; k < adag__chan_nbackends(); k++)
        n += ctx->domains[k] != NULL && (kinds >> k & 1);
    adag__wbuf_u32(out, n);
    for (uint32_t k = 0; k < adag__chan_nbackends(); k++) {
        adag_chan_domain_t *d = ctx->domains[k];
        if (!d || !(kinds >> k & 1))
            continue;
        adag_wbuf_t blob = {0};
        int dfds[ADAG_CHAN_DOMAIN_MAX_FDS];
        unsigned dn = 0;
        adag_status_t st = d->ops->domain_export(d, &blob, dfds, &dn);
        if (st == ADAG_OK && (dn > ADAG_CHAN_DOMAIN_MAX_FDS || *nfds + dn > max))
            st = adag__error(ADAG_ERR_INVALID, "%s domain: %u fds do not fit a message",
                            d->ops->name, dn);
        if (st != ADAG_OK) {
            adag__wbuf_free(&blob);
            return st;
        }
        adag__wbuf_str(out, d->ops->name);
        adag__wbuf_bytes(out, blob.data, blob.len);
        adag__wbuf_u32(out, dn);
        adag__wbuf_free(&blob);
        memcpy(fds + *nfds, dfds, dn * sizeof(int));
        *nfds += dn;
    }
    return out->failed ? adag__error(ADAG_ERR_NO_MEMORY, "exporting domains: out of memory")
                       : ADAG_OK;
}

adag_status_t adag__ctx_import_domains(adag_dag_ctx_t *ctx, adag_blob_t blob, int *fds,
                                      unsigned nfds)
{
    adag_rbuf_t rb = {blob.data, blob.len, 0, 0};
    unsigned used = 0;
    adag_status_t st = ADAG_OK;
    int attached[ADAG_CHAN_MAX_BACKENDS] = {0}; /* by this call: detached again on failure */
    uint32_t n = adag__rbuf_u32(&rb);
    if (rb.failed || n > adag__chan_nbackends()) {
        st = adag__error(ADAG_ERR_PROTOCOL, "malformed domain list (%u domains)", n);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        char name[ADAG_CHAN_BACKEND_NAME_MAX];
        adag__rbuf_str(&rb, name, sizeof(name));
        adag_blob_t b;
        b.data = adag__rbuf_bytes(&rb, &b.len);
        uint32_t dn = adag__rbuf_u32(&rb);
        int kind = rb.failed ? -1 : adag__chan_backend_find(name);
        if (!rb.failed && kind < 0) {
            st = adag__error(ADAG_ERR_PROTOCOL,
                            "domain %u of %u: backend '%s' is not in this build", i, n, name);
            goto out;
        }
        const adag_chan_ops_t *ops = adag__chan_backend((uint32_t)kind);
        if (rb.failed || !ops || !ops->domain_import || ctx->domains[kind] ||
            dn > ADAG_CHAN_DOMAIN_MAX_FDS || dn > nfds - used) {
            st = adag__error(ADAG_ERR_PROTOCOL,
                            "malformed domain %u of %u (backend %s, %u fds of %u left)", i, n,
                            rb.failed ? "?" : name, dn, nfds - used);
            goto out;
        }
        st = ops->domain_import(b, fds + used, dn, &ctx->domains[kind]);
        attached[kind] = st == ADAG_OK;
        for (uint32_t j = 0; j < dn; j++)
            fds[used + j] = -1; /* taken */
        used += dn;
        if (st != ADAG_OK) {
            adag__error_prefix("%s domain", ops->name);
            goto out;
        }
    }
    if (rb.pos != rb.len || used != nfds)
        st = adag__error(ADAG_ERR_PROTOCOL, "domain list: %zu trailing bytes, %u unused fds",
                        rb.len - rb.pos, nfds - used);
out:
    for (unsigned i = used; i < nfds; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
    /* a failed import leaves the context as it was: every fd it was given closed */
    for (unsigned k = 0; st != ADAG_OK && k < adag__chan_nbackends(); k++)
        if (attached[k]) {
            ctx->domains[k]->ops->domain_destroy(ctx->domains[k]);
            ctx->domains[k] = NULL;
        }
    return st;
}

size_t adag__ctx_domain_bytes(const adag_dag_ctx_t *ctx)
{
    size_t n = 0;
    for (unsigned k = 0; k < adag__chan_nbackends(); k++)
        if (ctx->domains[k] && ctx->domains[k]->ops->domain_bytes)
            n += ctx->domains[k]->ops->domain_bytes(ctx->domains[k]);
    return n;
}

adag_status_t adag__ctx_open(adag_dag_ctx_t *ctx, uint32_t kind, adag_chan_open_params_t *p,
                            adag_wbuf_t *peer_info, adag_chan_t **out)
{
    const adag_chan_ops_t *ops = adag__chan_backend(kind);
    if (!ops)
        return adag__error(ADAG_ERR_PROTOCOL, "channel %s: no backend %u in this build", p->name,
                          kind);
    p->abort = &ctx->abort;
    pthread_mutex_lock(&ctx->lock);
    if (ctx->neps == ctx->cap) {
        unsigned cap = ctx->cap ? 2 * ctx->cap : 16;
        adag_chan_t **eps = realloc(ctx->eps, cap * sizeof(*eps));
        if (!eps) {
            pthread_mutex_unlock(&ctx->lock);
            return adag__error(ADAG_ERR_NO_MEMORY, "channel %s: out of memory", p->name);
        }
        ctx->eps = eps;
        ctx->cap = cap;
    }
    pthread_mutex_unlock(&ctx->lock);
    adag_wbuf_t scratch = {0};
    adag_chan_t *ch = NULL;
    adag_status_t st = ops->open(ctx->domains[kind], p, peer_info ? peer_info : &scratch, &ch);
    adag__wbuf_free(&scratch);
    if (st != ADAG_OK)
        return st;
    pthread_mutex_lock(&ctx->lock);
    ctx->eps[ctx->neps++] = ch;
    int aborted = adag__ctx_aborted(ctx);
    pthread_mutex_unlock(&ctx->lock);
    if (aborted)
        ch->ops->wake_all(ch);
    *out = ch;
    return ADAG_OK;
}

int adag__ctx_abort(adag_dag_ctx_t *ctx, adag_status_t status)
{
    uint32_t none = 0;
    /* seq_cst: part of the event handshake (common/event.h) */
    int set = atomic_compare_exchange_strong_explicit(&ctx->abort, &none, (uint32_t)-status,
                                                      memory_order_seq_cst,
                                                      memory_order_seq_cst);
    /* a failure (not a plain destroy) leaves a communicator only this DAG
     * uses in an undefined state: aborted, so no collective or send/recv
     * of it waits on a member that stopped or died (the driver drops it);
     * a shared one only if the DAG was inside a collective on it (the
     * loops' hooks tell) */
    uint32_t word = atomic_load_explicit(&ctx->abort, memory_order_seq_cst);
    int failed = word != (uint32_t)-ADAG_ERR_CLOSED;
    pthread_mutex_lock(&ctx->lock);
    for (unsigned i = 0; i < ctx->neps; i++)
        ctx->eps[i]->ops->wake_all(ctx->eps[i]);
    for (unsigned i = 0; i < ctx->ncomms; i++)
        adag__actor_comm_dag_aborted(ctx->comms[i], failed);
    for (unsigned i = 0; i < ctx->nhooks; i++)
        ctx->hooks[i].fn(ctx->hooks[i].arg, failed);
    pthread_mutex_unlock(&ctx->lock);
    return set;
}

adag_status_t adag__ctx_add_abort_hook(adag_dag_ctx_t *ctx, void (*fn)(void *arg, int failed),
                                      void *arg)
{
    pthread_mutex_lock(&ctx->lock);
    struct adag_ctx_abort_hook *h = realloc(ctx->hooks, (ctx->nhooks + 1) * sizeof(*h));
    if (h) {
        ctx->hooks = h;
        ctx->hooks[ctx->nhooks++] = (struct adag_ctx_abort_hook){fn, arg};
    }
    pthread_mutex_unlock(&ctx->lock);
    return h ? ADAG_OK : adag__error(ADAG_ERR_NO_MEMORY, "DAG context: out of memory");
}

void adag__ctx_remove_abort_hook(adag_dag_ctx_t *ctx, void *arg)
{
    pthread_mutex_lock(&ctx->lock);
    for (unsigned i = 0; i < ctx->nhooks; i++)
        if (ctx->hooks[i].arg == arg)
            ctx->hooks[i--] = ctx->hooks[--ctx->nhooks];
    pthread_mutex_unlock(&ctx->lock);
}
