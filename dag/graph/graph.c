#include "common/error.h"
#include "common/params.h"
#include "dag/graph/graph.h"

#include <stdlib.h>
#include <string.h>

adag_status_t adag_graph_create(adag_runtime_h rt, adag_graph_h *out)
{
    if (!rt || !out)
        return adag__error(ADAG_ERR_INVALID,
                           "adag_graph_create: runtime and graph must not be NULL");
    adag_graph_h g = calloc(1, sizeof(*g));
    if (!g)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_create: out of memory");
    g->rt = rt;
    pthread_mutex_init(&g->lock, NULL);
    adag__list_init(&g->link);
    pthread_mutex_lock(&rt->lock);
    adag__list_push(&rt->graphs, &g->link);
    pthread_mutex_unlock(&rt->lock);
    *out = g;
    return ADAG_OK;
}

void adag__graph_free(adag_graph_h g)
{
    for (unsigned i = 0; i < g->nnodes; i++) {
        free(g->nodes[i]->returns);
        free(g->nodes[i]);
    }
    for (unsigned i = 0; i < g->nactors; i++)
        adag__actor_unref(g->actors[i]);
    for (unsigned i = 0; i < g->ncolls; i++) {
        free(g->colls[i]->inputs);
        free(g->colls[i]->outputs);
        free(g->colls[i]);
    }
    free(g->colls);
    free(g->actors);
    free(g->nodes);
    free(g->outputs);
    pthread_mutex_destroy(&g->lock);
    free(g);
}

adag_status_t adag_graph_destroy(adag_graph_h g)
{
    if (!g)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_destroy: graph is NULL");
    pthread_mutex_lock(&g->rt->lock);
    adag__list_remove(&g->link);
    pthread_mutex_unlock(&g->rt->lock);
    adag__graph_free(g);
    return ADAG_OK;
}

/* A short description of a node for messages: "node 3 (stage1.forward)". */
static void node_desc(adag_node_h n, char *buf, size_t len)
{
    switch (n->kind) {
    case NODE_INPUT:
        snprintf(buf, len, "node %u (input field %u)", n->id, n->field);
        break;
    case NODE_CALL:
        if (n->coll)
            snprintf(buf, len, "node %u (%s#%u on %s)", n->id, adag__coll_kind_name(n->coll->kind),
                     n->coll->id, n->actor->name);
        else
            snprintf(buf, len, "node %u (%s.%s)", n->id, n->actor->name,
                     n->actor->methods[n->method].name);
        break;
    case NODE_RETURN:
        snprintf(buf, len, "node %u (return %u of %s.%s)", n->id, n->ret, n->call->actor->name,
                 n->call->actor->methods[n->call->method].name);
        break;
    }
}

adag_status_t adag__graph_add_node(adag_graph_h g, adag_node_h *out)
{
    if (g->nnodes == g->cap) {
        unsigned cap = g->cap ? g->cap * 2 : 16;
        adag_node_h *nodes = realloc(g->nodes, cap * sizeof(*nodes));
        if (!nodes)
            return adag__error(ADAG_ERR_NO_MEMORY, "graph: out of memory for %u nodes", cap);
        g->nodes = nodes;
        g->cap = cap;
    }
    adag_node_h n = calloc(1, sizeof(*n));
    if (!n)
        return adag__error(ADAG_ERR_NO_MEMORY, "graph: out of memory");
    n->graph = g;
    n->id = g->nnodes;
    g->nodes[g->nnodes++] = n;
    *out = n;
    return ADAG_OK;
}

adag_status_t adag__graph_check_open(adag_graph_h g, const char *fn)
{
    if (g->compiled)
        return adag__error(ADAG_ERR_INVALID, "%s: the graph was already compiled", fn);
    return ADAG_OK;
}

adag_status_t adag_graph_input(adag_graph_h g, unsigned field, adag_node_h *out)
{
    adag_status_t st;
    if (!g || !out)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_input: graph and node must not be NULL");
    if (field >= 4096)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_input: field %u is too large", field);
    pthread_mutex_lock(&g->lock);
    if ((st = adag__graph_check_open(g, "adag_graph_input")) != ADAG_OK)
        goto out;
    for (unsigned i = 0; i < g->nnodes; i++) {
        if (g->nodes[i]->kind == NODE_INPUT && g->nodes[i]->field == field) {
            *out = g->nodes[i];
            goto out;
        }
    }
    adag_node_h n;
    if ((st = adag__graph_add_node(g, &n)) != ADAG_OK)
        goto out;
    n->kind = NODE_INPUT;
    n->field = field;
    *out = n;
out:
    pthread_mutex_unlock(&g->lock);
    return st;
}

/* The value a node stands for must be a single value of this graph. */
adag_status_t adag__graph_check_value(adag_graph_h g, adag_node_h n, const char *fn,
                                     const char *role, unsigned index)
{
    char d[160];
    if (!n)
        return adag__error(ADAG_ERR_INVALID, "%s: %s %u is NULL", fn, role, index);
    if (n->graph != g)
        return adag__error(ADAG_ERR_INVALID, "%s: %s %u is node %u of another graph", fn, role,
                          index, n->id);
    if (n->kind == NODE_CALL && n->nreturns != 1) {
        node_desc(n, d, sizeof(d));
        return adag__error(ADAG_ERR_INVALID,
                          "%s: %s %u is %s, which returns %u values: take one with "
                          "adag_node_output",
                          fn, role, index, d, n->nreturns);
    }
    return ADAG_OK;
}

adag_status_t adag_graph_bind(adag_graph_h g, adag_actor_h actor, const char *method,
                              const adag_node_h *args, unsigned nargs, adag_node_h *out)
{
    adag_status_t st = ADAG_OK;
    if (!g || !actor || !method || !out || (nargs && !args))
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_bind: graph, actor, method, args and node must not be NULL");
    if (actor->rt != g->rt)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_bind: actor %s belongs to another runtime",
                          actor->name);
    pthread_mutex_lock(&g->lock);
    if ((st = adag__graph_check_open(g, "adag_graph_bind")) != ADAG_OK)
        goto out;
    int m = adag__actor_method(actor, method);
    if (m < 0) {
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_graph_bind: node %u: actor %s (class %s) has no method %s", g->nnodes,
                        actor->name, actor->class_name, method);
        goto out;
    }
    if (actor->methods[m].nargs != nargs) {
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_graph_bind: node %u (%s.%s): takes %u args, %u given", g->nnodes,
                        actor->name, method, actor->methods[m].nargs, nargs);
        goto out;
    }
    for (unsigned i = 0; i < nargs; i++) {
        if ((st = adag__graph_check_value(g, args[i], "adag_graph_bind", "arg", i)) != ADAG_OK) {
            adag__error_prefix("node %u (%s.%s)", g->nnodes, actor->name, method);
            goto out;
        }
    }
    /* the graph holds one reference on each actor it binds */
    int known = 0;
    for (unsigned i = 0; i < g->nactors; i++)
        known |= g->actors[i] == actor;
    if (!known) {
        adag_actor_h *actors = realloc(g->actors, (g->nactors + 1) * sizeof(*actors));
        if (!actors) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_bind: out of memory");
            goto out;
        }
        g->actors = actors;
    }
    adag_node_h n;
    if ((st = adag__graph_add_node(g, &n)) != ADAG_OK)
        goto out;
    if (!known) {
        pthread_mutex_lock(&g->rt->lock);
        int gone = actor->user_destroyed;
        if (!gone)
            adag__actor_ref(actor);
        pthread_mutex_unlock(&g->rt->lock);
        if (gone) {
            g->nnodes--;
            free(n);
            st = adag__error(ADAG_ERR_INVALID, "adag_graph_bind: actor %s was destroyed",
                            actor->name);
            goto out;
        }
        g->actors[g->nactors++] = actor;
    }
    n->kind = NODE_CALL;
    n->actor = actor;
    n->method = (unsigned)m;
    n->nargs = nargs;
    n->nreturns = actor->methods[m].nreturns;
    for (unsigned i = 0; i < nargs; i++) {
        n->args[i] = args[i];
        if (args[i]->kind == NODE_INPUT)
            args[i]->used = 1;
    }
    *out = n;
out:
    pthread_mutex_unlock(&g->lock);
    return st;
}

adag_status_t adag_node_output(adag_node_h call, unsigned i, adag_node_h *out)
{
    adag_status_t st;
    if (!call || !out)
        return adag__error(ADAG_ERR_INVALID, "adag_node_output: node and value must not be NULL");
    adag_graph_h g = call->graph;
    pthread_mutex_lock(&g->lock);
    if ((st = adag__graph_check_open(g, "adag_node_output")) != ADAG_OK)
        goto out;
    if (call->kind != NODE_CALL) {
        st = adag__error(ADAG_ERR_INVALID, "adag_node_output: node %u is not a method call",
                        call->id);
        goto out;
    }
    if (i >= call->nreturns) {
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_node_output: node %u (%s.%s) has %u returns; %u is out of range",
                        call->id, call->actor->name, call->actor->methods[call->method].name,
                        call->nreturns, i);
        goto out;
    }
    if (call->nreturns == 1) {
        *out = call;
        goto out;
    }
    if (!call->returns && !(call->returns = calloc(call->nreturns, sizeof(*call->returns)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_node_output: out of memory");
        goto out;
    }
    if (!call->returns[i]) {
        adag_node_h n;
        if ((st = adag__graph_add_node(g, &n)) != ADAG_OK)
            goto out;
        n->kind = NODE_RETURN;
        n->call = call;
        n->ret = i;
        call->returns[i] = n;
    }
    *out = call->returns[i];
out:
    pthread_mutex_unlock(&g->lock);
    return st;
}

adag_status_t adag_graph_output(adag_graph_h g, const adag_node_h *nodes, unsigned n)
{
    adag_status_t st = ADAG_OK;
    if (!g || (n && !nodes))
        return adag__error(ADAG_ERR_INVALID, "adag_graph_output: graph and nodes must not be NULL");
    if (n == 0)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_output: at least one output is needed");
    pthread_mutex_lock(&g->lock);
    if ((st = adag__graph_check_open(g, "adag_graph_output")) != ADAG_OK)
        goto out;
    if (g->has_outputs) {
        st =
            adag__error(ADAG_ERR_INVALID, "adag_graph_output: the graph's outputs are already set");
        goto out;
    }
    for (unsigned i = 0; i < n; i++) {
        if ((st = adag__graph_check_value(g, nodes[i], "adag_graph_output", "output", i)) !=
            ADAG_OK)
            goto out;
        if (nodes[i]->kind == NODE_INPUT) {
            st = adag__error(ADAG_ERR_INVALID,
                            "adag_graph_output: output %u is node %u, an input field: outputs "
                            "must be method results",
                            i, nodes[i]->id);
            goto out;
        }
    }
    g->outputs = malloc(n * sizeof(*g->outputs));
    if (!g->outputs) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_output: out of memory");
        goto out;
    }
    memcpy(g->outputs, nodes, n * sizeof(*nodes));
    g->noutputs = n;
    g->has_outputs = 1;
out:
    pthread_mutex_unlock(&g->lock);
    return st;
}

void adag__node_describe(adag_node_h n, char *buf, size_t len)
{
    node_desc(n, buf, len);
}

adag_node_h adag__node_value(adag_node_h n, unsigned r)
{
    if (n->kind != NODE_CALL || n->nreturns == 1)
        return n;
    return n->returns ? n->returns[r] : NULL;
}

adag_tensor_decl_t adag__node_value_tensor(adag_node_h n, unsigned r)
{
    adag_tensor_decl_t none = {0};
    adag_node_h v = adag__node_value(n, r);
    return v ? v->tensor : none;
}

static const adag_param_field_t tensor_fields[] = {
    ADAG_PARAM_FIELD(adag_tensor_params_t, dtype, ADAG_TENSOR_PARAM_DTYPE),
    ADAG_PARAM_FIELD(adag_tensor_params_t, ndim, ADAG_TENSOR_PARAM_SHAPE),
    ADAG_PARAM_FIELD(adag_tensor_params_t, shape, ADAG_TENSOR_PARAM_SHAPE),
    ADAG_PARAM_FIELD(adag_tensor_params_t, transport, ADAG_TENSOR_PARAM_TRANSPORT),
};

/* The declaration params ask for, checked; "node ...: <what is wrong>" */
static adag_status_t tensor_decl(const adag_tensor_params_t *p, const char *d,
                                 adag_tensor_decl_t *out)
{
    static const char *fn = "adag_node_tensor";
    uint64_t mask = p ? p->field_mask : 0;
    adag_status_t st = adag__params_check(fn, "adag_tensor_params_t", p, mask, tensor_fields,
                                         ADAG_PARAM_COUNT(tensor_fields));
    if (st != ADAG_OK)
        return st;
    memset(out, 0, sizeof(*out));
    out->flags = ADAG_TENSOR_DECLARED;
    if (mask & ADAG_TENSOR_PARAM_DTYPE) {
        if (!adag__dtype_is_tensor(p->dtype))
            return adag__error(ADAG_ERR_INVALID,
                              "%s: %s: dtype %d (%s) is not a tensor dtype "
                              "(ADAG_DTYPE_U8..ADAG_DTYPE_BOOL)",
                              fn, d, (int)p->dtype, adag_dtype_name(p->dtype));
        out->flags |= ADAG_TENSOR_STATIC_DTYPE;
        out->dtype = (uint32_t)p->dtype;
    }
    if (mask & ADAG_TENSOR_PARAM_SHAPE) {
        if (p->ndim > ADAG_MAX_DIMS)
            return adag__error(ADAG_ERR_INVALID, "%s: %s: ndim %u exceeds ADAG_MAX_DIMS (%d)", fn,
                              d, p->ndim, ADAG_MAX_DIMS);
        for (unsigned k = 0; k < p->ndim; k++)
            if (p->shape[k] < 0)
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: %s: shape[%u] is %lld; dimensions must be >= 0", fn, d, k,
                                  (long long)p->shape[k]);
        /* the element size is at most 8: a shape whose bytes overflow fits no slot */
        size_t bytes;
        uint32_t dt = out->flags & ADAG_TENSOR_STATIC_DTYPE ? out->dtype : ADAG_DTYPE_I64;
        char why[200];
        if (adag__tensor_bytes(dt, p->ndim, p->shape, &bytes, why, sizeof(why)) != ADAG_TENSOR_OK)
            return adag__error(ADAG_ERR_INVALID, "%s: %s: %s", fn, d, why);
        out->flags |= ADAG_TENSOR_STATIC_SHAPE;
        out->ndim = p->ndim;
        memcpy(out->shape, p->shape, p->ndim * sizeof(p->shape[0]));
    }
    if (mask & ADAG_TENSOR_PARAM_TRANSPORT) {
        if ((unsigned)p->transport > ADAG_TRANSPORT_COMM)
            return adag__error(ADAG_ERR_INVALID,
                              "%s: %s: transport %d is not an adag_transport_t (AUTO, HOST, IPC, COMM)",
                              fn, d, (int)p->transport);
        out->transport = (uint32_t)p->transport;
    }
    return ADAG_OK;
}

/* What adag_node_tensor and adag_node_channel say of a value node: one of
 * its graph (not yet compiled) that stands for one value, not a call of
 * several returns (`what`: "declare", "size"); its description into d.
 * Under the graph's lock. */
static adag_status_t check_value_node(adag_node_h n, const char *fn, const char *what, char *d,
                                      size_t len)
{
    adag_graph_h g = n->graph;
    if (n->id >= g->nnodes || g->nodes[n->id] != n)
        return adag__error(ADAG_ERR_INVALID, "%s: node %u is not a node of its graph", fn, n->id);
    node_desc(n, d, len);
    if (g->compiled)
        return adag__error(ADAG_ERR_INVALID, "%s: %s: the graph was already compiled", fn, d);
    if (n->kind == NODE_CALL && n->nreturns != 1)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: %s returns %u values, each in a channel of its own: %s each one, "
                          "taken with adag_node_output",
                          fn, d, n->nreturns, what);
    return ADAG_OK;
}

adag_status_t adag_node_tensor(adag_node_h n, const adag_tensor_params_t *params)
{
    static const char *fn = "adag_node_tensor";
    adag_status_t st;
    adag_tensor_decl_t decl;
    char d[160];
    if (!n)
        return adag__error(ADAG_ERR_INVALID, "%s: node is NULL", fn);
    adag_graph_h g = n->graph;
    pthread_mutex_lock(&g->lock);
    if ((st = check_value_node(n, fn, "declare", d, sizeof(d))) != ADAG_OK)
        goto out;
    if ((st = tensor_decl(params, d, &decl)) != ADAG_OK)
        goto out;
    n->tensor = decl; /* a second declaration replaces the first */
out:
    pthread_mutex_unlock(&g->lock);
    return st;
}

static const adag_param_field_t channel_fields[] = {
    ADAG_PARAM_FIELD(adag_channel_params_t, max_bytes, ADAG_CHANNEL_PARAM_MAX_BYTES),
    ADAG_PARAM_FIELD(adag_channel_params_t, slots, ADAG_CHANNEL_PARAM_SLOTS),
};

adag_status_t adag_node_channel(adag_node_h n, const adag_channel_params_t *params)
{
    static const char *fn = "adag_node_channel";
    uint64_t mask = params ? params->field_mask : 0;
    adag_status_t st;
    char d[160];
    if (!n)
        return adag__error(ADAG_ERR_INVALID, "%s: node is NULL", fn);
    if ((st = adag__params_check(fn, "adag_channel_params_t", params, mask, channel_fields,
                                ADAG_PARAM_COUNT(channel_fields))) != ADAG_OK)
        return st;
    adag_graph_h g = n->graph;
    pthread_mutex_lock(&g->lock);
    if ((st = check_value_node(n, fn, "size", d, sizeof(d))) != ADAG_OK)
        goto out;
    if ((mask & ADAG_CHANNEL_PARAM_MAX_BYTES) && params->max_bytes > ADAG_PROG_MAX_CAPACITY) {
        st = adag__error(ADAG_ERR_INVALID, "%s: %s: max_bytes %zu is not in 0..2^40", fn, d,
                        params->max_bytes);
        goto out;
    }
    if ((mask & ADAG_CHANNEL_PARAM_SLOTS) &&
        (params->slots < 1 || params->slots > ADAG_PROG_MAX_INFLIGHT)) {
        st = adag__error(ADAG_ERR_INVALID, "%s: %s: slots %u is not in 1..%u", fn, d,
                        params->slots, ADAG_PROG_MAX_INFLIGHT);
        goto out;
    }
    /* a second call replaces the first */
    n->chan_mask = mask;
    n->chan_max_bytes = (mask & ADAG_CHANNEL_PARAM_MAX_BYTES) ? params->max_bytes : 0;
    n->chan_slots = (mask & ADAG_CHANNEL_PARAM_SLOTS) ? params->slots : 0;
out:
    pthread_mutex_unlock(&g->lock);
    return st;
}

const char *adag__coll_kind_name(adag_coll_kind_t kind)
{
    switch (kind) {
    case ADAG_COLL_ALLREDUCE:
        return "allreduce";
    case ADAG_COLL_ALLGATHER:
        return "allgather";
    case ADAG_COLL_REDUCESCATTER:
        return "reducescatter";
    case ADAG_COLL_BROADCAST:
        return "broadcast";
    }
    return "?";
}
