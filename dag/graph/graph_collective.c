/*
 * Collective nodes of a graph (include/adag.h: adag_graph_allreduce ...):
 * the checks of the members and their tensors, and one output node per
 * member, a one-return CALL node that the compiler turns into the member's
 * COLLECTIVE operation (dag/driver/compile.c, dag/graph/compile_comm.c).
 */
#include "common/error.h"
#include "dag/graph/graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static adag_actor_h writer_of(adag_node_h n)
{
    return n->kind == NODE_RETURN ? n->call->actor : n->actor;
}

/* Where an actor's collective tensors live, for messages. */
static const char *memory_of(adag_actor_h a)
{
    return a->device_kind < 0 ? "host memory (a host actor)"
                              : adag_device_kind_name((uint32_t)a->device_kind);
}

static int same_shape(const adag_tensor_decl_t *a, const adag_tensor_decl_t *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (uint32_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* The members' nodes, checked; fn is the caller's name. */
static adag_status_t check_members(adag_graph_h g, const char *fn, adag_coll_kind_t kind,
                                   adag_reduce_op_t op, const adag_node_h *nodes, unsigned n)
{
    char d[160], e[160];
    adag_status_t st;
    const adag_tensor_decl_t *dtype_from = NULL, *shape_from = NULL;
    unsigned dtype_at = 0, shape_at = 0;
    if (n < 2 || n > ADAG_COMM_MAX_RANKS)
        return adag__error(ADAG_ERR_INVALID, "%s: a collective has 2..%d members, not %u", fn,
                          ADAG_COMM_MAX_RANKS, n);
    for (unsigned i = 0; i < n; i++) {
        if ((st = adag__graph_check_value(g, nodes[i], fn, "node", i)) != ADAG_OK)
            return st;
        adag_node_h x = nodes[i];
        adag__node_describe(x, d, sizeof(d));
        if (x->kind == NODE_INPUT)
            return adag__error(ADAG_ERR_INVALID,
                              "%s: node %u is %s: the members of a collective are the actors "
                              "that wrote its nodes, so each must be a method's result",
                              fn, i, d);
        adag_actor_h a = writer_of(x);
        for (unsigned j = 0; j < i; j++) {
            if (writer_of(nodes[j]) == a) {
                adag__node_describe(nodes[j], e, sizeof(e));
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: nodes %u (%s) and %u (%s) are both written by %s: each "
                                  "member of a collective is a distinct actor",
                                  fn, j, e, i, d, a->name);
            }
            if (writer_of(nodes[j])->device_kind != a->device_kind)
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: node %u (%s) is in %s, node 0 in %s: the members of a "
                                  "collective are all host actors or all on devices of one "
                                  "backend",
                                  fn, i, d, memory_of(a), memory_of(writer_of(nodes[0])));
        }
        const adag_tensor_decl_t *t = &x->tensor;
        if (a->device_kind >= 0 && (t->flags & ADAG_TENSOR_DECLARED) &&
            t->transport == ADAG_TRANSPORT_HOST)
            return adag__error(ADAG_ERR_INVALID,
                              "%s: node %u (%s) is declared with transport ADAG_TRANSPORT_HOST: a "
                              "collective's tensors live on the members' devices",
                              fn, i, d);
        if (t->flags & ADAG_TENSOR_STATIC_DTYPE) {
            if (dtype_from && dtype_from->dtype != t->dtype)
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: node %u (%s) is declared %s, node %u %s: the tensors of a "
                                  "collective have one dtype",
                                  fn, i, d, adag_dtype_name((adag_dtype_t)t->dtype), dtype_at,
                                  adag_dtype_name((adag_dtype_t)dtype_from->dtype));
            if (t->dtype == ADAG_DTYPE_BOOL && op == ADAG_REDUCE_AVG &&
                (kind == ADAG_COLL_ALLREDUCE || kind == ADAG_COLL_REDUCESCATTER))
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: node %u (%s) is a bool tensor: bool has no average", fn, i,
                                  d);
            dtype_from = t;
            dtype_at = i;
        }
        if (t->flags & ADAG_TENSOR_STATIC_SHAPE) {
            if (shape_from && !same_shape(shape_from, t))
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: node %u (%s) has another static shape than node %u: the "
                                  "tensors of a collective have one shape",
                                  fn, i, d, shape_at);
            if ((kind == ADAG_COLL_ALLGATHER || kind == ADAG_COLL_REDUCESCATTER) &&
                t->ndim == 0)
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: node %u (%s) is a 0-dim tensor: %s works along dim 0", fn,
                                  i, d, adag__coll_kind_name(kind));
            if (kind == ADAG_COLL_REDUCESCATTER && t->shape[0] % n != 0)
                return adag__error(ADAG_ERR_INVALID,
                                  "%s: node %u (%s): dim 0 is %lld, not a multiple of the %u "
                                  "members",
                                  fn, i, d, (long long)t->shape[0], n);
            shape_from = t;
            shape_at = i;
        }
    }
    return ADAG_OK;
}

/* What the members' outputs are declared: the inputs' static dtype and
 * the shape the collective makes of their static shape. */
static adag_tensor_decl_t output_decl(adag_coll_kind_t kind, const adag_node_h *nodes, unsigned n)
{
    adag_tensor_decl_t out = {.flags = ADAG_TENSOR_DECLARED};
    for (unsigned i = 0; i < n; i++) {
        const adag_tensor_decl_t *t = &nodes[i]->tensor;
        if (t->flags & ADAG_TENSOR_STATIC_DTYPE) {
            out.flags |= ADAG_TENSOR_STATIC_DTYPE;
            out.dtype = t->dtype;
        }
        if (t->flags & ADAG_TENSOR_STATIC_SHAPE) {
            out.flags |= ADAG_TENSOR_STATIC_SHAPE;
            out.ndim = t->ndim;
            memcpy(out.shape, t->shape, sizeof(out.shape));
            if (kind == ADAG_COLL_ALLGATHER)
                out.shape[0] *= n;
            else if (kind == ADAG_COLL_REDUCESCATTER)
                out.shape[0] /= n;
        }
    }
    return out;
}

static adag_status_t make_collective(adag_graph_h g, const char *fn, adag_coll_kind_t kind,
                                     adag_reduce_op_t op, unsigned root, const adag_node_h *nodes,
                                     unsigned n, adag_node_h *outs)
{
    adag_status_t st;
    adag_collective_t *c = NULL, **colls;
    if (!g || !nodes || !outs)
        return adag__error(ADAG_ERR_INVALID, "%s: graph, nodes and outs must not be NULL", fn);
    if ((kind == ADAG_COLL_ALLREDUCE || kind == ADAG_COLL_REDUCESCATTER) &&
        (unsigned)op > ADAG_REDUCE_AVG)
        return adag__error(ADAG_ERR_INVALID,
                          "%s: op %d is not an adag_reduce_op_t (SUM, PROD, MIN, MAX, AVG)", fn,
                          (int)op);
    if (kind == ADAG_COLL_BROADCAST && root >= n)
        return adag__error(ADAG_ERR_INVALID, "%s: root %u of %u members", fn, root, n);
    pthread_mutex_lock(&g->lock);
    unsigned made = g->nnodes;
    if ((st = adag__graph_check_open(g, fn)) != ADAG_OK ||
        (st = check_members(g, fn, kind, op, nodes, n)) != ADAG_OK)
        goto out;
    c = calloc(1, sizeof(*c));
    colls = realloc(g->colls, (g->ncolls + 1) * sizeof(*colls));
    if (colls)
        g->colls = colls;
    if (!c || !colls || !(c->inputs = calloc(n, sizeof(*c->inputs))) ||
        !(c->outputs = calloc(n, sizeof(*c->outputs)))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "%s: out of memory", fn);
        goto out;
    }
    c->id = g->ncolls;
    c->kind = kind;
    c->op = op;
    c->root = root;
    c->n = n;
    adag_tensor_decl_t decl = output_decl(kind, nodes, n);
    for (unsigned i = 0; i < n; i++) {
        adag_node_h o;
        if ((st = adag__graph_add_node(g, &o)) != ADAG_OK)
            goto out;
        o->kind = NODE_CALL;
        o->actor = writer_of(nodes[i]);
        o->coll = c;
        o->member = i;
        o->nargs = 1;
        o->args[0] = nodes[i];
        o->nreturns = 1;
        o->tensor = decl;
        c->inputs[i] = nodes[i];
        c->outputs[i] = o;
    }
    /* the inputs are tensors; an undeclared one gets a per-execution dtype and shape */
    for (unsigned i = 0; i < n; i++)
        if (!(nodes[i]->tensor.flags & ADAG_TENSOR_DECLARED))
            nodes[i]->tensor.flags = ADAG_TENSOR_DECLARED;
    g->colls[g->ncolls++] = c;
    memcpy(outs, c->outputs, n * sizeof(*outs));
    c = NULL;
out:
    if (c) { /* the nodes made for it go too */
        while (g->nnodes > made)
            free(g->nodes[--g->nnodes]);
        free(c->inputs);
        free(c->outputs);
        free(c);
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

adag_status_t adag_graph_allreduce(adag_graph_h g, const adag_node_h *nodes, unsigned n,
                                   adag_reduce_op_t op, adag_node_h *outs)
{
    return make_collective(g, "adag_graph_allreduce", ADAG_COLL_ALLREDUCE, op, 0, nodes, n, outs);
}

adag_status_t adag_graph_allgather(adag_graph_h g, const adag_node_h *nodes, unsigned n,
                                   adag_node_h *outs)
{
    return make_collective(g, "adag_graph_allgather", ADAG_COLL_ALLGATHER, ADAG_REDUCE_SUM, 0,
                           nodes, n, outs);
}

adag_status_t adag_graph_reducescatter(adag_graph_h g, const adag_node_h *nodes, unsigned n,
                                       adag_reduce_op_t op, adag_node_h *outs)
{
    return make_collective(g, "adag_graph_reducescatter", ADAG_COLL_REDUCESCATTER, op, 0, nodes,
                           n, outs);
}

adag_status_t adag_graph_broadcast(adag_graph_h g, const adag_node_h *nodes, unsigned n,
                                   unsigned root, adag_node_h *outs)
{
    return make_collective(g, "adag_graph_broadcast", ADAG_COLL_BROADCAST, ADAG_REDUCE_SUM, root,
                           nodes, n, outs);
}
