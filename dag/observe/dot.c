/* Graphviz DOT of a compiled DAG: the driver and each actor as a box naming
 * its placement (thread, process, remote with its host) and device and
 * listing its schedule (READ/COMPUTE/WRITE per operation), and one edge per
 * (channel, reader) labelled with the channel's backend (and "tensor f32[4,8]"
 * for a value declared a tensor). */
#include "common/error.h"
#include "common/out.h"
#include "dag/driver/dag.h"

#include <stdio.h>
#include <string.h>

/* "ALLREDUCE#0 sum, member 1 of group [tp0 tp1]" (each member's status
 * channel is named "<collective>.<member actor>") */
static void collective_line(adag_out_t *out, const adag_program_t *p, const adag_prog_op_t *op)
{
    static const char *const ops[] = {"sum", "prod", "min", "max", "avg"};
    adag__out_printf(out, "COLLECTIVE %s#%u", adag__coll_kind_name((adag_coll_kind_t)op->coll_kind),
                    op->coll_id);
    if (op->coll_kind == ADAG_COLL_ALLREDUCE || op->coll_kind == ADAG_COLL_REDUCESCATTER)
        adag__out_printf(out, " %s", op->reduce_op < 5 ? ops[op->reduce_op] : "?");
    if (op->coll_kind == ADAG_COLL_BROADCAST)
        adag__out_printf(out, " root %u", op->root);
    adag__out_printf(out, ", member %u of group [", op->member);
    for (uint32_t m = 0; m < op->nmembers; m++) {
        const char *name = strchr(p->chans[op->status_first + m].name, '.');
        adag__out_printf(out, "%s%s", m ? " " : "", name ? name + 1 : "?");
    }
    adag__out_printf(out, "]\\l");
}

static void actor_node(adag_out_t *out, adag_dag_h dag, unsigned ai)
{
    const adag_dag_actor_t *da = &dag->run.actors[ai];
    const adag_program_t *p = &da->prog;
    /* its placement (a remote one's node) and its device */
    const adag_actor_h actor = da->actor;
    char device[ADAG_DEVICE_SPEC_MAX + 8] = "no device";
    if (actor->device_kind >= 0)
        snprintf(device, sizeof(device), "device %s:%u",
                 adag_device_kind_name((uint32_t)actor->device_kind), actor->device_index);
    if (actor->node[0])
        adag__out_printf(out, "  a%u [shape=box, label=\"%s (remote, node %s, %s)\\l", ai,
                        actor->name, actor->node, device);
    else
        adag__out_printf(out, "  a%u [shape=box, label=\"%s (%s, %s)\\l", ai, actor->name,
                        actor->ops->name, device);
    /* where it runs and how its loop waits (dag/proc/actor_place.h, adag__dag_policy) */
    char where[ADAG_CPULIST_MAX + 160];
    adag__place_format(&actor->place, where, sizeof(where));
    adag__out_printf(out, "%s; waits: %s\\l", where, p->spin_yield ? "spin, yielding" : "spin");
    for (uint32_t i = 0; i < p->nops; i++) {
        const adag_prog_op_t *op = &p->ops[i];
        for (uint32_t a = 0; a < op->nargs; a++)
            adag__out_printf(out, "READ %s\\l", p->chans[op->args[a]].name);
        if (op->kind == ADAG_OP_COLLECTIVE)
            collective_line(out, p, op);
        else
            adag__out_printf(out, "COMPUTE %s\\l", actor->methods[op->method].name);
        for (uint32_t r = 0; r < op->nrets; r++)
            adag__out_printf(out, "WRITE %s\\l", p->chans[op->rets[r]].name);
    }
    adag__out_printf(out, "\"];\n");
}

/* "\ntensor f32[4,8]" for a value declared a tensor, "" otherwise. */
static void tensor_label(char *buf, size_t len, const adag_dag_chan_t *ch)
{
    char t[160];
    if (!(ch->tensor.flags & ADAG_TENSOR_DECLARED)) {
        buf[0] = '\0';
        return;
    }
    adag__tensor_decl_format(t, sizeof(t), &ch->tensor);
    snprintf(buf, len, "\\ntensor%s%s", t[0] ? " " : "", t);
}

/* How the channel's value reaches reader r, as its backend says it
 * (ops label): "\\nemu_ipc peer copy emu:0 -> emu:1"; "" if it says nothing. */
static void device_label(char *buf, size_t len, const adag_dag_chan_t *ch, unsigned r)
{
    const adag_chan_ops_t *ops = adag__chan_backend(ch->backend);
    buf[0] = '\0';
    if (!ops || !ops->label || len < 3)
        return;
    ops->label(&ch->geom, ch->places, r, buf + 2, len - 2);
    if (buf[2]) {
        buf[0] = '\\';
        buf[1] = 'n';
    }
}

static void endpoint(adag_out_t *out, int who)
{
    if (who < 0)
        adag__out_printf(out, "driver");
    else
        adag__out_printf(out, "a%d", who);
}

static adag_status_t write_dot(void *arg, adag_out_t *out)
{
    adag_dag_h dag = arg;
    adag__out_printf(out, "digraph \"%s\" {\n  rankdir=LR;\n", dag->run.name);
    adag__out_printf(out,
                    "  driver [shape=ellipse, label=\"driver\\nmax_inflight=%u default slot=%zu "
                    "B\"];\n",
                    dag->plan.max_inflight, dag->plan.default_capacity);
    for (unsigned ai = 0; ai < dag->run.nactors; ai++)
        actor_node(out, dag, ai);
    for (unsigned c = 0; c < dag->plan.nchans; c++) {
        const adag_dag_chan_t *ch = &dag->plan.chans[c];
        char tensor[200], slots[64];
        tensor_label(tensor, sizeof(tensor), ch);
        /* its geometry: "8 slots x 4096 B" */
        snprintf(slots, sizeof(slots), "%u slot%s x %zu B", ch->geom.nslots,
                 ch->geom.nslots == 1 ? "" : "s", ch->geom.capacity);
        if (ch->nreaders == 0) {
            /* read by its writer only (or by nobody): an in-place edge if it is read */
            int read = 0;
            for (unsigned ai = 0; ai < dag->run.nactors && !read; ai++) {
                const adag_program_t *p = &dag->run.actors[ai].prog;
                for (uint32_t i = 0; i < p->nops && !read; i++)
                    for (uint32_t a = 0; a < p->ops[i].nargs; a++)
                        read |= p->chans[p->ops[i].args[a]].id == c;
            }
            if (read) {
                adag__out_printf(out, "  ");
                endpoint(out, ch->writer);
                adag__out_printf(out, " -> ");
                endpoint(out, ch->writer);
                adag__out_printf(out, " [label=\"%s\\n%s%s\\n%s\", style=dashed];\n", ch->name,
                                adag__chan_backend_name(ch->backend), tensor, slots);
            }
            continue;
        }
        for (unsigned r = 0; r < ch->nreaders; r++) {
            adag__out_printf(out, "  ");
            endpoint(out, ch->writer);
            adag__out_printf(out, " -> ");
            endpoint(out, ch->readers[r]);
            char dev[160];
            device_label(dev, sizeof(dev), ch, r);
            adag__out_printf(out, " [label=\"%s\\n%s%s%s\\n%s\"];\n", ch->name,
                            adag__chan_backend_name(ch->backend), dev, tensor, slots);
        }
    }
    adag__out_printf(out, "}\n");
    return ADAG_OK;
}

adag_status_t adag_dag_write_dot(adag_dag_h dag, adag_writer_t out)
{
    return adag__out_run("adag_dag_write_dot", "dag", dag, out, write_dot);
}

adag_status_t adag_dag_format_dot(adag_dag_h dag, char *buf, size_t len, size_t *needed)
{
    return adag__out_run_buffer("adag_dag_format_dot", "dag", dag, buf, len, needed, write_dot);
}
