/*
 * adag._adag: what a graph declares of its values, and its collectives.
 *
 *   g.tensor(node, dtype=None, shape=None, transport=None)  adag_node_tensor
 *   node.tensor(...)                                        the same
 *   g.channel(node, max_bytes=None, slots=None)             adag_node_channel
 *   node.channel(...)                                       the same
 *   g.allreduce(nodes, op="sum")                            adag_graph_allreduce
 *   g.allgather(nodes)                                      adag_graph_allgather
 *   g.reducescatter(nodes, op="sum")                        adag_graph_reducescatter
 *   g.broadcast(nodes, root=0)                              adag_graph_broadcast
 *
 * Each collective returns a tuple of nodes, one per member (outs[i] on
 * member i's device). The library checks the graph's rules (members,
 * devices, dtypes) and raises adag.InvalidError naming the node; misuse
 * that never reaches it (an unknown op, a node of another graph) raises
 * ValueError or TypeError here.
 */
#include "adagpy.h"

#include <string.h>

#define MAX_MEMBERS 64

static const char *const transports[] = {"auto", "host", "ipc", "comm"};
static const char *const ops[] = {"sum", "prod", "min", "max", "avg"};

/* The index of name o in names[0..n); -1 with ValueError. */
static int pick(PyObject *o, const char *const *names, int n, const char *what)
{
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    if (PyUnicode_Check(o) && !s)
        return -1;
    PyObject *all = PyUnicode_FromString(names[0]);
    for (int i = 1; all && i < n; i++)
        PyUnicode_AppendAndDel(&all, PyUnicode_FromFormat(", %s", names[i]));
    if (all) {
        PyErr_Format(PyExc_ValueError, "%s: %R: one of %U", what, o, all);
        Py_DECREF(all);
    }
    return -1;
}

/* node: a Node of g; -1 with TypeError. */
static int node_of(GraphObject *g, PyObject *o, adag_node_h *out, const char *what)
{
    if (!PyObject_TypeCheck(o, &Node_Type) || ((NodeObject *)o)->graph != g) {
        PyErr_Format(PyExc_TypeError, "%s: %.80s is not a node of this graph", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = ((NodeObject *)o)->node;
    return 0;
}

/* ---- tensor and channel ---- */

static PyObject *declare_tensor(GraphObject *g, PyObject *node, PyObject *dtype, PyObject *shape,
                                PyObject *transport)
{
    const char *what = "Graph.tensor";
    adag_node_h n;
    adag_tensor_params_t p = {0};
    if (adagpy_check_open(g->rt, what) < 0 || node_of(g, node, &n, what) < 0)
        return NULL;
    if (dtype && dtype != Py_None) {
        if (adagpy_dtype_parse(dtype, &p.dtype, what) < 0)
            return NULL;
        p.field_mask |= ADAG_TENSOR_PARAM_DTYPE;
    }
    if (shape && shape != Py_None) {
        if (adagpy_shape_parse(shape, p.shape, &p.ndim, what) < 0)
            return NULL;
        p.field_mask |= ADAG_TENSOR_PARAM_SHAPE;
    }
    if (transport && transport != Py_None) {
        int t = pick(transport, transports, 4, "Graph.tensor(transport)");
        if (t < 0)
            return NULL;
        p.transport = (adag_transport_t)t;
        p.field_mask |= ADAG_TENSOR_PARAM_TRANSPORT;
    }
    adag_status_t st = adag_node_tensor(n, &p);
    return st == ADAG_OK ? Py_NewRef(node) : adagpy_raise(st, what);
}

static PyObject *declare_channel(GraphObject *g, PyObject *node, PyObject *max_bytes,
                                 PyObject *slots)
{
    const char *what = "Graph.channel";
    adag_node_h n;
    adag_channel_params_t p = {0};
    if (adagpy_check_open(g->rt, what) < 0 || node_of(g, node, &n, what) < 0)
        return NULL;
    if (max_bytes && max_bytes != Py_None) {
        long long b = PyLong_AsLongLong(max_bytes);
        if (b == -1 && PyErr_Occurred())
            return NULL;
        if (b < 0) {
            PyErr_Format(PyExc_ValueError, "%s: max_bytes %lld is negative", what, b);
            return NULL;
        }
        p.max_bytes = (size_t)b;
        p.field_mask |= ADAG_CHANNEL_PARAM_MAX_BYTES;
    }
    if (slots && slots != Py_None) {
        long s = PyLong_AsLong(slots);
        if (s == -1 && PyErr_Occurred())
            return NULL;
        if (s < 0 || s > (long)UINT32_MAX) {
            PyErr_Format(PyExc_ValueError, "%s: slots %ld: 1..max_inflight", what, s);
            return NULL;
        }
        p.slots = (unsigned)s;
        p.field_mask |= ADAG_CHANNEL_PARAM_SLOTS;
    }
    adag_status_t st = adag_node_channel(n, &p);
    return st == ADAG_OK ? Py_NewRef(node) : adagpy_raise(st, what);
}

PyObject *adagpy_graph_tensor(GraphObject *g, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"node", "dtype", "shape", "transport", NULL};
    PyObject *node, *dtype = NULL, *shape = NULL, *transport = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:tensor", kwlist, &node, &dtype, &shape,
                                     &transport))
        return NULL;
    return declare_tensor(g, node, dtype, shape, transport);
}

PyObject *adagpy_graph_channel(GraphObject *g, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"node", "max_bytes", "slots", NULL};
    PyObject *node, *max_bytes = NULL, *slots = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OO:channel", kwlist, &node, &max_bytes,
                                     &slots))
        return NULL;
    return declare_channel(g, node, max_bytes, slots);
}

static PyObject *Node_tensor(NodeObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"dtype", "shape", "transport", NULL};
    PyObject *dtype = NULL, *shape = NULL, *transport = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOO:tensor", kwlist, &dtype, &shape,
                                     &transport))
        return NULL;
    return declare_tensor(self->graph, (PyObject *)self, dtype, shape, transport);
}

static PyObject *Node_channel(NodeObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"max_bytes", "slots", NULL};
    PyObject *max_bytes = NULL, *slots = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO:channel", kwlist, &max_bytes, &slots))
        return NULL;
    return declare_channel(self->graph, (PyObject *)self, max_bytes, slots);
}

PyMethodDef adagpy_node_methods[] = {
    {"tensor", (PyCFunction)(void (*)(void))Node_tensor, METH_VARARGS | METH_KEYWORDS,
     "tensor(dtype=None, shape=None, transport=None) -> this node: it is a tensor "
     "(adag_node_tensor)"},
    {"channel", (PyCFunction)(void (*)(void))Node_channel, METH_VARARGS | METH_KEYWORDS,
     "channel(max_bytes=None, slots=None) -> this node: its channel's slot size and count "
     "(adag_node_channel)"},
    {NULL, NULL, 0, NULL},
};

/* ---- collectives ---- */

typedef enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST } kind_t;

static const char *const kind_names[] = {"Graph.allreduce", "Graph.allgather",
                                         "Graph.reducescatter", "Graph.broadcast"};

static PyObject *collective(GraphObject *g, kind_t kind, PyObject *nodes, PyObject *op_o,
                            unsigned root)
{
    const char *what = kind_names[kind];
    adag_node_h in[MAX_MEMBERS], outs[MAX_MEMBERS];
    if (adagpy_check_open(g->rt, what) < 0)
        return NULL;
    PyObject *seq = PySequence_Fast(nodes, "");
    if (!seq) {
        PyErr_Format(PyExc_TypeError, "%s: nodes is %.80s, not a sequence of nodes", what,
                     Py_TYPE(nodes)->tp_name);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > MAX_MEMBERS) {
        PyErr_Format(PyExc_ValueError, "%s: %zd nodes, at most %d", what, n, MAX_MEMBERS);
        Py_DECREF(seq);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (node_of(g, PySequence_Fast_GET_ITEM(seq, i), &in[i], what) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    Py_DECREF(seq);
    int op = 0;
    if (op_o && (op = pick(op_o, ops, 5, what)) < 0)
        return NULL;
    adag_status_t st;
    switch (kind) {
    case ALLREDUCE:
        st = adag_graph_allreduce(g->graph, in, (unsigned)n, (adag_reduce_op_t)op, outs);
        break;
    case ALLGATHER:
        st = adag_graph_allgather(g->graph, in, (unsigned)n, outs);
        break;
    case REDUCESCATTER:
        st = adag_graph_reducescatter(g->graph, in, (unsigned)n, (adag_reduce_op_t)op, outs);
        break;
    default:
        st = adag_graph_broadcast(g->graph, in, (unsigned)n, root, outs);
        break;
    }
    if (st != ADAG_OK)
        return adagpy_raise(st, what);
    PyObject *t = PyTuple_New(n);
    for (Py_ssize_t i = 0; t && i < n; i++) {
        PyObject *o = adagpy_node_new(g, outs[i]);
        if (!o)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, o);
    }
    return t;
}

PyObject *adagpy_graph_allreduce(GraphObject *g, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"nodes", "op", NULL};
    PyObject *nodes, *op = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:allreduce", kwlist, &nodes, &op))
        return NULL;
    return collective(g, ALLREDUCE, nodes, op, 0);
}

PyObject *adagpy_graph_allgather(GraphObject *g, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"nodes", NULL};
    PyObject *nodes;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O:allgather", kwlist, &nodes))
        return NULL;
    return collective(g, ALLGATHER, nodes, NULL, 0);
}

PyObject *adagpy_graph_reducescatter(GraphObject *g, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"nodes", "op", NULL};
    PyObject *nodes, *op = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:reducescatter", kwlist, &nodes, &op))
        return NULL;
    return collective(g, REDUCESCATTER, nodes, op, 0);
}

PyObject *adagpy_graph_broadcast(GraphObject *g, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"nodes", "root", NULL};
    PyObject *nodes;
    unsigned root = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|I:broadcast", kwlist, &nodes, &root))
        return NULL;
    return collective(g, BROADCAST, nodes, NULL, root);
}
