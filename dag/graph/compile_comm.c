/*
 * The compiler's part for tensors declared with ADAG_TRANSPORT_COMM: the
 * DAG's communicator (one, over every device actor such a tensor touches,
 * leased from dag/proc/comm_lease.c), each channel's key and ranks, and the
 * check that the ranks issue their send/recv in one consistent order.
 *
 * Why the order matters: a send occupies its rank's stream until the peer
 * posted the matching recv (NCCL's rule, and the host communicator's), and
 * each rank issues its operations in its program's order, every execution.
 * Each transfer (a tensor to one of its device readers) is a send on the
 * writer and a recv on the reader; "rank P issues X before Y" is an edge
 * X -> Y. Without a cycle, the transfers run in a topological order and
 * none waits forever; with one, the ranks on the cycle wait on each other.
 */
#include "common/error.h"
#include "dag/graph/plan.h"

#include <stdio.h>
#include <stdlib.h>

static int is_comm(const adag_dag_chan_t *c)
{
    return (c->tensor.flags & ADAG_TENSOR_DECLARED) && c->tensor.transport == ADAG_TRANSPORT_COMM;
}

static const char *who(const adag_dag_run_t *run, int ai)
{
    return ai < 0 ? "the driver" : run->actors[ai].actor->name;
}

static int cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/* A refusal of tensor c, naming its edge: the writer and reader r (-1:
 * its readers). */
static adag_status_t comm_error(const adag_dag_run_t *run, const adag_dag_chan_t *c, int r,
                                const char *fmt, const char *arg)
{
    char why[256];
    snprintf(why, sizeof(why), fmt, arg);
    return adag__error(ADAG_ERR_INVALID,
                      "adag_graph_compile: tensor %s (%s -> %s%s) is declared with transport "
                      "ADAG_TRANSPORT_COMM, but %s",
                      c->name, who(run, c->writer),
                      r >= 0 ? who(run, c->readers[r])
                      : c->nreaders ? who(run, c->readers[0]) : "no reader",
                      r < 0 && c->nreaders > 1 ? " and others" : "", why);
}

/* Adds actor id to the set ids[0..*n) if absent. */
static adag_status_t add_rank(unsigned *ids, unsigned *n, unsigned id)
{
    for (unsigned i = 0; i < *n; i++)
        if (ids[i] == id)
            return ADAG_OK;
    if (*n == ADAG_COMM_MAX_RANKS)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: tensors with transport ADAG_TRANSPORT_COMM join "
                          "more than %d actors in one communicator",
                          ADAG_COMM_MAX_RANKS);
    ids[(*n)++] = id;
    return ADAG_OK;
}

/* Leases the communicator of backend ops over ids[0..n) (rank order) for
 * the DAG, or finds the one it already leased over that list. */
static adag_status_t lease_group(adag_plan_t *plan, const adag_dag_run_t *run, const adag_comm_ops_t *ops,
                                 const unsigned *ids, unsigned n, int exclusive,
                                 adag_comm_lease_t **out)
{
    for (unsigned i = 0; i < plan->ncomm_leases; i++) {
        adag_comm_lease_t *l = plan->comm_leases[i];
        int same = adag__comm_lease_ops(l) == ops && adag__comm_lease_nranks(l) == n;
        for (unsigned r = 0; same && r < n; r++)
            same = adag__comm_lease_rank(l, ids[r]) == (int)r;
        if (same) {
            *out = l;
            return ADAG_OK;
        }
    }
    adag_comm_lease_t **ls = realloc(plan->comm_leases, (plan->ncomm_leases + 1) * sizeof(*ls));
    if (!ls)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    plan->comm_leases = ls;
    if (plan->ncomm_leases == 64)
        return adag__error(ADAG_ERR_INVALID, "adag_graph_compile: a DAG uses at most 64 "
                          "communicators (distinct member lists)");
    adag_status_t st = adag__comm_lease_take(run->rt, ops, ids, n, exclusive, out);
    if (st != ADAG_OK) {
        adag__error_prefix("adag_graph_compile");
        return st;
    }
    plan->comm_leases[plan->ncomm_leases++] = *out;
    return ADAG_OK;
}

/* The communicator backend of device kind `kind`, runnable here. */
static adag_status_t backend_of(int kind, const char *what, const adag_comm_ops_t **out)
{
    char why[200] = "";
    const adag_comm_ops_t *ops = adag__comm_backend_for_device((adag_device_kind_t)kind);
    if (!ops)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_graph_compile: %s: no communicator backend moves %s tensors",
                          what, adag_device_kind_name((uint32_t)kind));
    if (!ops->probe(why, sizeof(why)))
        return adag__error(ADAG_ERR_NOT_FOUND,
                          "adag_graph_compile: %s needs the %s communicator, which cannot run "
                          "here: %s",
                          what, ops->name, why);
    *out = ops;
    return ADAG_OK;
}

/* The tensors with ADAG_TRANSPORT_COMM: one communicator over every
 * device actor they touch (ranks in actor-id order). */
static adag_status_t plan_transfers(adag_plan_t *plan, const adag_dag_run_t *run)
{
    unsigned ids[ADAG_COMM_MAX_RANKS], n = 0;
    int kind = -1;
    const adag_dag_chan_t *first = NULL;
    adag_status_t st;

    for (unsigned ci = 0; ci < plan->nchans; ci++) {
        const adag_dag_chan_t *c = &plan->chans[ci];
        if (!is_comm(c))
            continue;
        if (c->writer < 0)
            return comm_error(run, c, -1, "%s writes it: a communicator joins device-bound "
                              "actors", "the driver");
        if (c->places[0].kind < 0)
            return comm_error(run, c, -1, "its writer %s is not a device-bound actor",
                              who(run, c->writer));
        unsigned ndev = 0;
        for (unsigned r = 0; r < c->nreaders; r++) {
            if (c->places[1 + r].kind < 0)
                continue; /* host memory: by the ring's copy */
            if (c->readers[r] < 0)
                return comm_error(run, c, (int)r, "%s reads it on its driver device: a "
                                  "communicator joins actors only (without a driver device "
                                  "the driver reads it in host memory)", "the driver");
            ndev++;
        }
        if (ndev == 0)
            return comm_error(run, c, -1, "none of its readers is a device-bound actor "
                              "(writer %s)", who(run, c->writer));
        if (kind >= 0 && c->places[0].kind != kind)
            return adag__error(ADAG_ERR_INVALID,
                              "adag_graph_compile: tensors %s (%s devices) and %s (%s devices) "
                              "have transport ADAG_TRANSPORT_COMM: the communicator of a DAG "
                              "joins devices of one backend",
                              first->name, adag_device_kind_name((uint32_t)kind), c->name,
                              adag_device_kind_name((uint32_t)c->places[0].kind));
        kind = c->places[0].kind;
        if (!first)
            first = c;
        if ((st = add_rank(ids, &n, run->actors[c->writer].actor->id)) != ADAG_OK)
            return st;
        for (unsigned r = 0; r < c->nreaders; r++)
            if (c->places[1 + r].kind >= 0 &&
                (st = add_rank(ids, &n, run->actors[c->readers[r]].actor->id)) != ADAG_OK)
                return st;
    }
    if (!first)
        return ADAG_OK;
    const adag_comm_ops_t *ops;
    char what[160];
    snprintf(what, sizeof(what), "tensor %s (transport ADAG_TRANSPORT_COMM)", first->name);
    if ((st = backend_of(kind, what, &ops)) != ADAG_OK)
        return st;
    qsort(ids, n, sizeof(ids[0]), cmp_unsigned);
    adag_comm_lease_t *l;
    if ((st = lease_group(plan, run, ops, ids, n, 1, &l)) != ADAG_OK)
        return st;
    for (unsigned ci = 0; ci < plan->nchans; ci++) {
        adag_dag_chan_t *c = &plan->chans[ci];
        if (!is_comm(c))
            continue;
        c->comm_key = adag__comm_lease_key(l);
        for (unsigned j = 0; j <= c->nreaders; j++) {
            int ai = j == 0 ? c->writer : c->readers[j - 1];
            if (c->places[j].kind >= 0)
                c->places[j].comm_rank =
                    (uint32_t)adag__comm_lease_rank(l, run->actors[ai].actor->id);
        }
    }
    return ADAG_OK;
}

adag_status_t adag__compile_comm_plan(adag_plan_t *plan, const adag_dag_run_t *run, const adag_collective_t *const *colls,
                                     unsigned ncolls, const int *actor_index)
{
    adag_status_t st = plan_transfers(plan, run);
    if (st != ADAG_OK || ncolls == 0)
        return st;
    /* each collective: the communicator over its members, ranks in member order */
    if (!(plan->coll_keys = calloc(ncolls, sizeof(*plan->coll_keys))))
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    plan->ncolls = ncolls;
    for (unsigned k = 0; k < ncolls; k++) {
        const adag_collective_t *c = colls[k];
        unsigned ids[ADAG_COMM_MAX_RANKS];
        for (unsigned m = 0; m < c->n; m++)
            ids[m] = run->actors[actor_index[c->outputs[m]->id]].actor->id;
        const adag_comm_ops_t *ops;
        char what[160];
        snprintf(what, sizeof(what), "%s#%u", adag__coll_kind_name(c->kind), c->id);
        /* host actors' tensors are in host memory: the host communicator's */
        int kind = c->outputs[0]->actor->device_kind;
        if ((st = backend_of(kind < 0 ? ADAG_DEV_EMULATED : kind, what, &ops)) != ADAG_OK)
            return st;
        adag_comm_lease_t *l;
        if ((st = lease_group(plan, run, ops, ids, c->n, 0, &l)) != ADAG_OK)
            return st;
        plan->coll_keys[k] = adag__comm_lease_key(l);
    }
    return ADAG_OK;
}

adag_status_t adag__compile_comm_program(const adag_plan_t *plan, const adag_dag_run_t *run,
                                        unsigned ai, adag_program_t *p)
{
    if (!plan->ncomm_leases)
        return ADAG_OK;
    if (!(p->comms = calloc(plan->ncomm_leases, sizeof(*p->comms))))
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    for (unsigned i = 0; i < plan->ncomm_leases; i++) {
        const adag_comm_lease_t *l = plan->comm_leases[i];
        int rank = adag__comm_lease_rank(l, run->actors[ai].actor->id);
        if (rank < 0)
            continue;
        uint32_t ncolls = 0;
        for (unsigned k = 0; k < plan->ncolls; k++)
            ncolls += plan->coll_keys[k] == adag__comm_lease_key(l);
        p->comms[p->ncomms++] = (adag_comm_spec_t){
            .key = adag__comm_lease_key(l),
            .kind = adag__comm_lease_ops(l)->kind,
            .nranks = adag__comm_lease_nranks(l),
            .rank = (uint32_t)rank,
            .id = *adag__comm_lease_id(l),
            .shared = (uint32_t)adag__comm_lease_shared(l),
            .ncolls = ncolls,
            .order_chan = ADAG_PROG_NO_CHAN, /* build_program: the local number */
        };
    }
    return ADAG_OK;
}

/* ---- the order check ---- */

typedef struct {
    unsigned from, to;
    unsigned actor; /* the rank that issues `from` before `to` */
} order_edge_t;

typedef struct {
    const adag_plan_t *plan;
    const adag_dag_run_t *run;
    unsigned *first;     /* per channel: its first transfer's number (readers in order) */
    unsigned ntransfers; /* nodes 0..ntransfers: transfers; then one per collective */
    unsigned nnodes;
    unsigned *chan_of;   /* per transfer */
    unsigned *reader_of; /* per transfer */
    order_edge_t *edges;
    unsigned nedges, cap;
} order_t;

static adag_status_t add_edge(order_t *o, unsigned from, unsigned to, unsigned actor)
{
    if (o->nedges == o->cap) {
        unsigned cap = o->cap ? 2 * o->cap : 16;
        order_edge_t *e = realloc(o->edges, cap * sizeof(*e));
        if (!e)
            return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
        o->edges = e;
        o->cap = cap;
    }
    o->edges[o->nedges++] = (order_edge_t){from, to, actor};
    return ADAG_OK;
}

/* Actor ai's transfers in the order it issues them each execution: at
 * each call, a recv per communicator argument (once per value), then a
 * send per return and device reader, in reader order. Consecutive ones
 * make the edges. */
static adag_status_t actor_edges(order_t *o, unsigned ai, unsigned char *received)
{
    const adag_plan_t *plan = o->plan;
    const adag_dag_run_t *run = o->run;
    const adag_program_t *p = &run->actors[ai].prog;
    long prev = -1;
    adag_status_t st;
    memset(received, 0, plan->nchans);
    for (uint32_t i = 0; i < p->nops; i++) {
        const adag_prog_op_t *op = &p->ops[i];
        if (op->kind == ADAG_OP_COLLECTIVE) {
            unsigned t = o->ntransfers + op->coll_id;
            if (prev >= 0 && (st = add_edge(o, (unsigned)prev, t, ai)) != ADAG_OK)
                return st;
            prev = t;
        }
        for (uint32_t a = 0; op->kind == ADAG_OP_CALL && a < op->nargs; a++) {
            const adag_prog_chan_t *pc = &p->chans[op->args[a]];
            const adag_dag_chan_t *c = &plan->chans[pc->id];
            if (!c->comm_key || pc->reader < 0 || c->places[1 + pc->reader].kind < 0 ||
                received[pc->id])
                continue;
            received[pc->id] = 1;
            unsigned t = o->first[pc->id] + (unsigned)pc->reader;
            if (prev >= 0 && (st = add_edge(o, (unsigned)prev, t, ai)) != ADAG_OK)
                return st;
            prev = t;
        }
        for (uint32_t r = 0; r < op->nrets; r++) {
            unsigned ci = p->chans[op->rets[r]].id;
            const adag_dag_chan_t *c = &plan->chans[ci];
            if (!c->comm_key)
                continue;
            for (unsigned rd = 0; rd < c->nreaders; rd++) {
                if (c->places[1 + rd].kind < 0)
                    continue;
                unsigned t = o->first[ci] + rd;
                if (prev >= 0 && (st = add_edge(o, (unsigned)prev, t, ai)) != ADAG_OK)
                    return st;
                prev = t;
            }
        }
    }
    return ADAG_OK;
}

static void transfer_name(order_t *o, unsigned t, char *buf, size_t len)
{
    if (t >= o->ntransfers) { /* a collective: its name and members, from a member's op */
        unsigned k = t - o->ntransfers;
        for (unsigned ai = 0; ai < o->run->nactors; ai++) {
            const adag_program_t *p = &o->run->actors[ai].prog;
            for (uint32_t i = 0; i < p->nops; i++)
                if (p->ops[i].kind == ADAG_OP_COLLECTIVE && p->ops[i].coll_id == k) {
                    static const char *const kinds[] = {"allreduce", "allgather",
                                                        "reducescatter", "broadcast"};
                    snprintf(buf, len, "%s#%u (%u members)",
                             kinds[p->ops[i].coll_kind & 3], k, p->ops[i].nmembers);
                    return;
                }
        }
        snprintf(buf, len, "collective #%u", k);
        return;
    }
    const adag_dag_chan_t *c = &o->plan->chans[o->chan_of[t]];
    snprintf(buf, len, "%s (%s -> %s)", c->name, who(o->run, c->writer),
             who(o->run, c->readers[o->reader_of[t]]));
}

/* A cycle is left after Kahn's sort: from a node still holding an
 * incoming edge, walk back along such edges until a node repeats. */
static adag_status_t report_cycle(order_t *o, const unsigned *indeg)
{
    unsigned n = o->nnodes, start = 0;
    unsigned *step = malloc((n + 1) * sizeof(*step)); /* node -> its edge into it on the walk */
    unsigned *seen = calloc(n + 1, sizeof(*seen));
    if (!step || !seen) {
        free(step);
        free(seen);
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
    }
    while (indeg[start] == 0)
        start++;
    unsigned v = start, len = 0;
    while (!seen[v]) {
        seen[v] = 1;
        unsigned e = 0;
        while (o->edges[e].to != v || indeg[o->edges[e].from] == 0)
            e++;
        step[v] = e;
        v = o->edges[e].from;
    }
    /* v is on the cycle: its edge in is X -> v, from rank P */
    const order_edge_t *in = &o->edges[step[v]];
    for (unsigned u = in->from; ; u = o->edges[step[u]].from) {
        len++;
        if (u == v)
            break;
    }
    char x[200], y[200];
    transfer_name(o, in->from, x, sizeof(x));
    transfer_name(o, in->to, y, sizeof(y));
    const char *p = o->run->actors[in->actor].actor->name;
    adag_status_t st;
    if (len == 2) {
        const order_edge_t *back = &o->edges[step[in->from]];
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_graph_compile: the communication operations %s and %s would wait "
                        "on each other: %s issues the first before the second, %s the second "
                        "before the first; bind them in one order (or declare a tensor with "
                        "transport ADAG_TRANSPORT_IPC or ADAG_TRANSPORT_HOST)",
                        x, y, p, o->run->actors[back->actor].actor->name);
    } else {
        st = adag__error(ADAG_ERR_INVALID,
                        "adag_graph_compile: the communication operations %s and %s would wait "
                        "on each other through a cycle of %u operations (%s issues the first "
                        "before the second); bind them in one order (or declare a tensor with "
                        "transport ADAG_TRANSPORT_IPC or ADAG_TRANSPORT_HOST)",
                        x, y, len, p);
    }
    free(step);
    free(seen);
    return st;
}

adag_status_t adag__compile_comm_check_order(const adag_plan_t *plan, const adag_dag_run_t *run)
{
    order_t o = {.plan = plan, .run = run};
    adag_status_t st = ADAG_OK;
    unsigned *indeg = NULL, *queue = NULL;
    unsigned char *received = NULL;
    if (!plan->ncomm_leases)
        return ADAG_OK;
    o.first = calloc(plan->nchans + 1, sizeof(*o.first));
    received = calloc(plan->nchans + 1, 1);
    if (!o.first || !received)
        goto nomem;
    for (unsigned ci = 0; ci < plan->nchans; ci++) {
        o.first[ci] = o.ntransfers;
        if (plan->chans[ci].comm_key)
            o.ntransfers += plan->chans[ci].nreaders;
    }
    o.nnodes = o.ntransfers + plan->ncolls;
    o.chan_of = calloc(o.ntransfers + 1, sizeof(*o.chan_of));
    o.reader_of = calloc(o.ntransfers + 1, sizeof(*o.reader_of));
    indeg = calloc(o.nnodes + 1, sizeof(*indeg));
    queue = calloc(o.nnodes + 1, sizeof(*queue));
    if (!o.chan_of || !o.reader_of || !indeg || !queue)
        goto nomem;
    for (unsigned ci = 0; ci < plan->nchans; ci++)
        for (unsigned r = 0; plan->chans[ci].comm_key && r < plan->chans[ci].nreaders; r++) {
            o.chan_of[o.first[ci] + r] = ci;
            o.reader_of[o.first[ci] + r] = r;
        }
    for (unsigned ai = 0; ai < run->nactors && st == ADAG_OK; ai++)
        st = actor_edges(&o, ai, received);
    if (st != ADAG_OK)
        goto out;
    /* Kahn: what is left holds a cycle */
    for (unsigned e = 0; e < o.nedges; e++)
        indeg[o.edges[e].to]++;
    unsigned head = 0, tail = 0;
    for (unsigned t = 0; t < o.nnodes; t++)
        if (indeg[t] == 0)
            queue[tail++] = t;
    while (head < tail) {
        unsigned t = queue[head++];
        for (unsigned e = 0; e < o.nedges; e++)
            if (o.edges[e].from == t && --indeg[o.edges[e].to] == 0)
                queue[tail++] = o.edges[e].to;
    }
    if (tail < o.nnodes)
        st = report_cycle(&o, indeg);
    goto out;
nomem:
    st = adag__error(ADAG_ERR_NO_MEMORY, "adag_graph_compile: out of memory");
out:
    free(o.first);
    free(o.chan_of);
    free(o.reader_of);
    free(o.edges);
    free(indeg);
    free(queue);
    free(received);
    return st;
}
