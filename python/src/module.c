/*
 * adag._adag: errors (one exception per adag_status_t, generated from the
 * library's status list), the runtime, actors, graphs and nodes, and the
 * module itself. Compiled DAGs are in dag.c; the views of slots in view.c;
 * tensor inputs in tensor.c; reservations in reserve.c; tensor
 * declarations and collectives in collective.c.
 */
#include "adagpy.h"

#include <ctype.h>
#include <dlfcn.h>
#include <string.h>

/* ---- errors ---- */

#define MAX_STATUS 64
static PyObject *error_base;                /* adag.Error */
static PyObject *error_by_code[MAX_STATUS]; /* index -status */

PyObject *adagpy_raise(adag_status_t st, const char *what)
{
    const char *msg = adag_last_error();
    PyObject *cls = (st < 0 && -st < MAX_STATUS && error_by_code[-st]) ? error_by_code[-st]
                                                                        : error_base;
    PyObject *exc = PyObject_CallFunction(cls, "s", msg && msg[0] ? msg : what);
    if (!exc)
        return NULL;
    PyObject *code = PyLong_FromLong(st);
    if (!code || PyObject_SetAttrString(exc, "status", code) < 0) {
        Py_XDECREF(code);
        Py_DECREF(exc);
        return NULL;
    }
    Py_DECREF(code);
    PyErr_SetObject(cls, exc);
    Py_DECREF(exc);
    return NULL;
}

int adagpy_check_open(RuntimeObject *rt, const char *what)
{
    if (rt->rt)
        return 0;
    PyErr_Format(error_by_code[-ADAG_ERR_CLOSED], "%s: the runtime is closed", what);
    return -1;
}

int adagpy_timeout_ms(PyObject *timeout, const char *what)
{
    if (!timeout || timeout == Py_None)
        return -1;
    double s = PyFloat_AsDouble(timeout);
    if (s == -1.0 && PyErr_Occurred())
        return -2;
    if (!(s >= 0) || s > 2e6) {
        PyErr_Format(PyExc_ValueError, "%s: timeout %R: seconds in [0, 2e6], or None", what,
                     timeout);
        return -2;
    }
    return (int)(s * 1000.0 + 0.999);
}

/* "ADAG_ERR_ACTOR_DIED: ..." -> "ActorDiedError"; 0 if not an error name. */
static int error_class_name(adag_status_t st, char *out, size_t len)
{
    const char *s = adag_status_str(st), *p = "ADAG_ERR_";
    if (strncmp(s, p, strlen(p)) != 0)
        return 0;
    size_t o = 0;
    int up = 1;
    for (s += strlen(p); *s && *s != ':' && o + 7 < len; s++) {
        if (*s == '_') {
            up = 1;
            continue;
        }
        out[o++] = up ? (char)toupper((unsigned char)*s) : (char)tolower((unsigned char)*s);
        up = 0;
    }
    memcpy(out + o, "Error", 6);
    return 1;
}

static int add_errors(PyObject *m)
{
    error_base = PyErr_NewExceptionWithDoc(
        "adag.Error",
        "An adag call failed: .status is its adag_status_t code (negative), str() the "
        "message of adag_last_error(), naming what failed and where.",
        NULL, NULL);
    if (!error_base || PyModule_AddObjectRef(m, "Error", error_base) < 0)
        return -1;
    for (int code = 1; code < MAX_STATUS; code++) {
        char name[64], qual[80];
        if (!error_class_name((adag_status_t)-code, name, sizeof(name)))
            break;
        snprintf(qual, sizeof(qual), "adag.%s", name);
        /* TimeoutError is also the builtin one, so `except TimeoutError` catches it */
        PyObject *bases = code == -ADAG_ERR_TIMEOUT
                              ? PyTuple_Pack(2, error_base, PyExc_TimeoutError)
                              : PyTuple_Pack(1, error_base);
        if (!bases)
            return -1;
        error_by_code[code] = PyErr_NewException(qual, bases, NULL);
        Py_DECREF(bases);
        if (!error_by_code[code] || PyModule_AddObjectRef(m, name, error_by_code[code]) < 0)
            return -1;
    }
    return 0;
}

/* ---- Runtime ---- */

static int Runtime_init(RuntimeObject *self, PyObject *args, PyObject *kw)
{
    adag_config_h config = NULL;
    adag_status_t st;
    if (PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError,
                        "Runtime() takes settings by keyword: Runtime(spin_ns=0, ...)");
        return -1;
    }
    if (self->rt) {
        PyErr_SetString(PyExc_RuntimeError, "Runtime.__init__: already initialized");
        return -1;
    }
    if (kw && PyDict_GET_SIZE(kw)) {
        if ((st = adag_config_read(&config)) != ADAG_OK)
            goto fail_status;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(kw, &pos, &key, &value)) {
            const char *k = PyUnicode_AsUTF8(key);
            char name[128];
            if (!k)
                goto fail;
            if (strlen(k) + 6 > sizeof(name)) {
                PyErr_Format(PyExc_ValueError, "Runtime(): setting name %.40s... too long", k);
                goto fail;
            }
            size_t i = 0;
            memcpy(name, "ADAG_", 5);
            for (; k[i]; i++)
                name[5 + i] = (char)toupper((unsigned char)k[i]);
            name[5 + i] = 0;
            PyObject *text = PyBool_Check(value) ? PyUnicode_FromString(value == Py_True ? "1" : "0")
                                                 : PyObject_Str(value);
            const char *v = text ? PyUnicode_AsUTF8(text) : NULL;
            if (!v) {
                Py_XDECREF(text);
                goto fail;
            }
            st = adag_config_modify(config, name, v);
            Py_DECREF(text);
            if (st != ADAG_OK)
                goto fail_status;
        }
    }
    adag_runtime_params_t p = {.field_mask = config ? ADAG_RUNTIME_PARAM_CONFIG : 0,
                               .config = config};
    Py_BEGIN_ALLOW_THREADS
    st = adag_runtime_create(&p, &self->rt);
    Py_END_ALLOW_THREADS
    if (st != ADAG_OK)
        goto fail_status;
    if (config)
        adag_config_release(config);
    self->modules = PyDict_New();
    return self->modules ? 0 : -1;
fail_status:
    adagpy_raise(st, "Runtime()");
fail:
    if (config)
        adag_config_release(config);
    return -1;
}

static int runtime_close(RuntimeObject *self)
{
    if (!self->rt)
        return 0;
    if (self->nbusy) {
        PyErr_Format(error_by_code[-ADAG_ERR_BUSY],
                     "Runtime.close: %ld calls of other threads are still inside the runtime",
                     self->nbusy);
        return -1;
    }
    adag_runtime_h rt = self->rt;
    self->rt = NULL;
    adag_status_t st;
    Py_BEGIN_ALLOW_THREADS
    st = adag_runtime_destroy(rt);
    Py_END_ALLOW_THREADS
    /* the modules of thread actors stay loaded: their classes' code may
     * still be referenced by the process (never unloaded, like CPython's
     * own extension modules) */
    if (st != ADAG_OK) {
        adagpy_raise(st, "Runtime.close");
        return -1;
    }
    return 0;
}

static PyObject *Runtime_close(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    return runtime_close(self) < 0 ? NULL : Py_NewRef(Py_None);
}

static PyObject *Runtime_enter(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    if (adagpy_check_open(self, "Runtime.__enter__") < 0)
        return NULL;
    return Py_NewRef(self);
}

static PyObject *Runtime_exit(RuntimeObject *self, PyObject *args)
{
    (void)args;
    return runtime_close(self) < 0 ? NULL : Py_NewRef(Py_False);
}

static void Runtime_dealloc(RuntimeObject *self)
{
    if (self->rt && runtime_close(self) < 0)
        PyErr_WriteUnraisable((PyObject *)self);
    Py_XDECREF(self->modules);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Registers every class of module `path` for thread actors, once per
 * runtime. The module's adag_call_* references bind to the libadag this
 * extension loaded, made global first (the extension itself is loaded
 * RTLD_LOCAL by the interpreter). */
static int load_module(RuntimeObject *self, const char *path)
{
    if (PyDict_GetItemString(self->modules, path))
        return 0;
    Dl_info info;
    if (!dladdr((void *)adag_last_error, &info) || !info.dli_fname ||
        !dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL)) {
        PyErr_Format(error_by_code[-ADAG_ERR_NOT_FOUND],
                     "Runtime.actor: cannot make libadag's symbols global for module %s: %s",
                     path, dlerror());
        return -1;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        PyErr_Format(error_by_code[-ADAG_ERR_NOT_FOUND], "Runtime.actor: cannot load module %s: %s",
                     path, dlerror());
        return -1;
    }
    const uint32_t *abi = dlsym(h, "adag_module_abi_version");
    const adag_class_def_t *const *classes = dlsym(h, "adag_module_classes");
    if (!abi || *abi != ADAG_ABI_VERSION || !classes) {
        PyErr_Format(error_by_code[-ADAG_ERR_INVALID],
                     "Runtime.actor: module %s: %s (this library's ABI version is %u)", path,
                     !abi ? "no adag_module_abi_version" : !classes ? "no adag_module_classes"
                                                                   : "another ABI version",
                     ADAG_ABI_VERSION);
        return -1;
    }
    for (unsigned i = 0; classes[i]; i++) {
        adag_status_t st = adag_class_register(self->rt, classes[i]);
        if (st != ADAG_OK) {
            adagpy_raise(st, "Runtime.actor");
            return -1;
        }
    }
    PyObject *cap = PyCapsule_New(h, "adag.module", NULL);
    int rc = cap ? PyDict_SetItemString(self->modules, path, cap) : -1;
    Py_XDECREF(cap);
    return rc;
}

typedef struct {
    PyObject_HEAD
    RuntimeObject *rt;
    adag_actor_h actor;
    PyObject *name;
    int pid;
} ActorObject;

static PyObject *Runtime_actor(RuntimeObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"cls",  "module", "placement", "init", "device",
                             "name", "args",   "kwargs",    NULL};
    const char *cls = NULL, *module = NULL, *placement = NULL, *device = NULL, *name = NULL;
    PyObject *cls_obj, *cargs = NULL, *ckwargs = NULL, *keep = NULL;
    Py_buffer init = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|zzz*zz$OO:actor", kwlist, &cls_obj, &module,
                                     &placement, &init, &device, &name, &cargs, &ckwargs))
        return NULL;
    PyObject *result = NULL;
    ActorObject *a = NULL;
    int python = PyType_Check(cls_obj);
    if (adagpy_check_open(self, "Runtime.actor") < 0)
        goto out;
    if (!python && !(cls = PyUnicode_AsUTF8(cls_obj))) {
        PyErr_Format(PyExc_TypeError,
                     "Runtime.actor: the class is a name (a C class) or a Python class, not %s",
                     Py_TYPE(cls_obj)->tp_name);
        goto out;
    }
    if (python && (module || init.buf)) {
        PyErr_SetString(PyExc_TypeError, "Runtime.actor: a Python class takes args= and "
                                         "kwargs=, not module= or init=");
        goto out;
    }
    if (!python && (cargs || ckwargs)) {
        PyErr_Format(PyExc_TypeError, "Runtime.actor(%s): args= and kwargs= are for Python "
                     "classes; a C class takes init= bytes", cls);
        goto out;
    }
    adag_actor_params_t p = {.field_mask = ADAG_ACTOR_PARAM_CLASS, .class_name = cls};
    /* a C class runs in a process when it comes from a module, a Python class by default */
    int process = placement ? strcmp(placement, "process") == 0 : module != NULL || python;
    if (placement && !process && strcmp(placement, "thread") != 0) {
        PyErr_Format(PyExc_ValueError, "Runtime.actor(%s): placement %s: \"thread\" or \"process\"",
                     python ? ((PyTypeObject *)cls_obj)->tp_name : cls, placement);
        goto out;
    }
    if (python) {
        if (adagpy_python_actor(self, cls_obj, cargs, ckwargs, !process, &p, &keep) < 0)
            goto out;
        module = p.module_path;
        if (p.init_size)
            p.field_mask |= ADAG_ACTOR_PARAM_INIT;
    }
    if (module && !process && load_module(self, module) < 0)
        goto out;
    if (process) {
        p.field_mask |= ADAG_ACTOR_PARAM_PLACEMENT | (module ? ADAG_ACTOR_PARAM_MODULE : 0);
        p.placement = ADAG_PLACEMENT_PROCESS;
        p.module_path = module;
    }
    if (init.buf) {
        p.field_mask |= ADAG_ACTOR_PARAM_INIT;
        p.init_data = init.buf;
        p.init_size = (size_t)init.len;
    }
    if (device) {
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = device;
    }
    if (name) {
        p.field_mask |= ADAG_ACTOR_PARAM_NAME;
        p.name = name;
    }
    a = PyObject_New(ActorObject, &Actor_Type);
    if (!a)
        goto out;
    a->rt = (RuntimeObject *)Py_NewRef(self);
    a->actor = NULL;
    a->name = NULL;
    adag_status_t st;
    self->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_actor_create(self->rt, &p, &a->actor);
    Py_END_ALLOW_THREADS
    self->nbusy--;
    if (st != ADAG_OK) {
        adagpy_raise(st, "Runtime.actor");
        goto out;
    }
    a->pid = adag_actor_pid(a->actor);
    if (!(a->name = PyUnicode_FromString(adag_actor_name(a->actor))))
        goto out;
    result = Py_NewRef(a);
out:
    Py_XDECREF(a);
    Py_XDECREF(keep);
    if (init.buf)
        PyBuffer_Release(&init);
    return result;
}

/* ---- Actor ---- */

static void Actor_dealloc(ActorObject *self)
{
    if (self->actor && self->rt->rt)
        adag_actor_destroy(self->actor); /* stops once no DAG uses it */
    Py_XDECREF(self->name);
    Py_DECREF(self->rt);
    PyObject_Free(self);
}

static PyObject *Actor_repr(ActorObject *self)
{
    return PyUnicode_FromFormat("<adag.Actor %U pid=%d>", self->name, self->pid);
}

/* ---- Graph and Node ---- */

static PyObject *Runtime_graph(RuntimeObject *self, PyObject *unused)
{
    (void)unused;
    if (adagpy_check_open(self, "Runtime.graph") < 0)
        return NULL;
    GraphObject *g = PyObject_New(GraphObject, &Graph_Type);
    if (!g)
        return NULL;
    g->rt = (RuntimeObject *)Py_NewRef(self);
    g->noutputs = 0;
    g->compiled = 0;
    g->graph = NULL;
    if (!(g->actors = PySet_New(NULL))) {
        Py_DECREF(g);
        return NULL;
    }
    adag_status_t st = adag_graph_create(self->rt, &g->graph);
    if (st != ADAG_OK) {
        g->graph = NULL;
        Py_DECREF(g);
        return adagpy_raise(st, "Runtime.graph");
    }
    return (PyObject *)g;
}

static void Graph_dealloc(GraphObject *self)
{
    if (self->graph && self->rt->rt)
        adag_graph_destroy(self->graph);
    Py_XDECREF(self->actors);
    Py_DECREF(self->rt);
    PyObject_Free(self);
}

PyObject *adagpy_node_new(GraphObject *g, adag_node_h n)
{
    NodeObject *o = PyObject_New(NodeObject, &Node_Type);
    if (!o)
        return NULL;
    o->graph = (GraphObject *)Py_NewRef(g);
    o->node = n;
    return (PyObject *)o;
}

static void Node_dealloc(NodeObject *self)
{
    Py_DECREF(self->graph);
    PyObject_Free(self);
}

static PyObject *Graph_input(GraphObject *self, PyObject *arg)
{
    unsigned long field = PyLong_AsUnsignedLong(arg);
    if (field == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (adagpy_check_open(self->rt, "Graph.input") < 0)
        return NULL;
    adag_node_h n;
    adag_status_t st = adag_graph_input(self->graph, (unsigned)field, &n);
    return st == ADAG_OK ? adagpy_node_new(self, n) : adagpy_raise(st, "Graph.input");
}

/* Collects nodes of this graph from seq into out[0..n); -1 with TypeError. */
static int nodes_of(GraphObject *g, PyObject *seq, Py_ssize_t first, adag_node_h *out,
                    const char *what)
{
    for (Py_ssize_t i = first; i < PyTuple_GET_SIZE(seq); i++) {
        PyObject *o = PyTuple_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, &Node_Type) || ((NodeObject *)o)->graph != g) {
            PyErr_Format(PyExc_TypeError, "%s: argument %zd is %.80s, not a node of this graph",
                         what, i - first, Py_TYPE(o)->tp_name);
            return -1;
        }
        out[i - first] = ((NodeObject *)o)->node;
    }
    return 0;
}

#define MAX_ARGS 64

static PyObject *Graph_bind(GraphObject *self, PyObject *args)
{
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (nargs < 2 || !PyObject_TypeCheck(PyTuple_GET_ITEM(args, 0), &Actor_Type) ||
        !PyUnicode_Check(PyTuple_GET_ITEM(args, 1))) {
        PyErr_SetString(PyExc_TypeError, "Graph.bind(actor, \"method\", *nodes)");
        return NULL;
    }
    if (nargs - 2 > MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "Graph.bind: %zd arguments, at most %d", nargs - 2,
                     MAX_ARGS);
        return NULL;
    }
    ActorObject *a = (ActorObject *)PyTuple_GET_ITEM(args, 0);
    const char *method = PyUnicode_AsUTF8(PyTuple_GET_ITEM(args, 1));
    adag_node_h in[MAX_ARGS], call, v;
    if (!method || adagpy_check_open(self->rt, "Graph.bind") < 0 ||
        nodes_of(self, args, 2, in, "Graph.bind") < 0)
        return NULL;
    adag_status_t st = adag_graph_bind(self->graph, a->actor, method, in, (unsigned)(nargs - 2),
                                       &call);
    if (st != ADAG_OK)
        return adagpy_raise(st, "Graph.bind");
    if (PySet_Add(self->actors, (PyObject *)a) < 0)
        return NULL;
    /* a method of several returns gives a tuple of nodes, one per return */
    if (adag_node_output(call, 1, &v) != ADAG_OK)
        return adagpy_node_new(self, call);
    PyObject *outs = PyList_New(0);
    for (unsigned i = 0; outs && adag_node_output(call, i, &v) == ADAG_OK; i++) {
        PyObject *n = adagpy_node_new(self, v);
        if (!n || PyList_Append(outs, n) < 0) {
            Py_XDECREF(n);
            Py_CLEAR(outs);
        }
        Py_XDECREF(n);
    }
    if (!outs)
        return NULL;
    PyObject *t = PyList_AsTuple(outs);
    Py_DECREF(outs);
    return t;
}

static PyObject *Graph_output(GraphObject *self, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    adag_node_h out[MAX_ARGS];
    if (n > MAX_ARGS) {
        PyErr_Format(PyExc_ValueError, "Graph.output: %zd outputs, at most %d", n, MAX_ARGS);
        return NULL;
    }
    if (adagpy_check_open(self->rt, "Graph.output") < 0 ||
        nodes_of(self, args, 0, out, "Graph.output") < 0)
        return NULL;
    adag_status_t st = adag_graph_output(self->graph, out, (unsigned)n);
    if (st != ADAG_OK)
        return adagpy_raise(st, "Graph.output");
    self->noutputs = (unsigned)n;
    Py_RETURN_NONE;
}

static PyObject *Graph_compile(GraphObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"max_inflight", "slot_capacity", "execute_timeout",
                             "teardown_timeout", "name", "spin_ns", "driver_device",
                             "trace_spans", "run_ahead", "graphs", NULL};
    int max_inflight = -1, run_ahead = -1, graphs = -1;
    long long slot_capacity = -1, spin_ns = -1, trace_spans = -1;
    PyObject *exec_t = NULL, *tear_t = NULL;
    const char *name = NULL, *driver_device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$iLOOzLzLpp:compile", kwlist, &max_inflight,
                                     &slot_capacity, &exec_t, &tear_t, &name, &spin_ns,
                                     &driver_device, &trace_spans, &run_ahead, &graphs))
        return NULL;
    if (adagpy_check_open(self->rt, "Graph.compile") < 0)
        return NULL;
    adag_compile_params_t p = {0};
    if (max_inflight >= 0) {
        p.field_mask |= ADAG_COMPILE_PARAM_MAX_INFLIGHT;
        p.max_inflight = (unsigned)max_inflight;
    }
    if (slot_capacity >= 0) {
        p.field_mask |= ADAG_COMPILE_PARAM_SLOT_CAPACITY;
        p.slot_capacity = (size_t)slot_capacity;
    }
    if (exec_t) {
        if ((p.execute_timeout_ms = adagpy_timeout_ms(exec_t, "compile(execute_timeout)")) == -2)
            return NULL;
        p.field_mask |= ADAG_COMPILE_PARAM_EXECUTE_TIMEOUT;
    }
    if (tear_t && tear_t != Py_None) {
        if ((p.teardown_timeout_ms = adagpy_timeout_ms(tear_t, "compile(teardown_timeout)")) == -2)
            return NULL;
        p.field_mask |= ADAG_COMPILE_PARAM_TEARDOWN_TIMEOUT;
    }
    if (name) {
        p.field_mask |= ADAG_COMPILE_PARAM_NAME;
        p.name = name;
    }
    if (spin_ns >= 0) {
        p.field_mask |= ADAG_COMPILE_PARAM_SPIN;
        p.spin_ns = spin_ns;
    }
    if (driver_device) {
        p.field_mask |= ADAG_COMPILE_PARAM_DRIVER_DEVICE;
        p.driver_device = driver_device;
    }
    if (trace_spans >= 0) {
        p.field_mask |= ADAG_COMPILE_PARAM_TRACE;
        p.trace_spans = (uint64_t)trace_spans;
    }
    if (run_ahead >= 0) {
        p.field_mask |= ADAG_COMPILE_PARAM_RUN_AHEAD;
        p.run_ahead = run_ahead;
    }
    if (graphs >= 0) {
        p.field_mask |= ADAG_COMPILE_PARAM_GRAPHS;
        p.graphs = graphs;
    }
    adag_dag_h dag = NULL;
    adag_status_t st;
    self->rt->nbusy++;
    Py_BEGIN_ALLOW_THREADS
    st = adag_graph_compile(self->graph, &p, &dag);
    Py_END_ALLOW_THREADS
    self->rt->nbusy--;
    if (st != ADAG_OK)
        return adagpy_raise(st, "Graph.compile");
    unsigned nin = 0;
    adag_dag_inputs(dag, NULL, 0, &nin);
    PyObject *d = adagpy_dag_new(self->rt, dag, self->noutputs, nin);
    if (d && exec_t)
        ((DagObject *)d)->execute_timeout_ms = p.execute_timeout_ms;
    return d;
}

/* ---- types and the module ---- */

static PyMethodDef Runtime_methods[] = {
    {"actor", (PyCFunction)(void (*)(void))Runtime_actor, METH_VARARGS | METH_KEYWORDS,
     "actor(class_name, module=None, placement=None, init=None, device=None, name=None)"},
    {"graph", (PyCFunction)Runtime_graph, METH_NOARGS, "A new, empty graph."},
    {"close", (PyCFunction)Runtime_close, METH_NOARGS,
     "Destroys every DAG, graph and actor of the runtime and stops its workers."},
    {"__enter__", (PyCFunction)Runtime_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)Runtime_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject *Runtime_get_closed(RuntimeObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(self->rt == NULL);
}

static PyGetSetDef Runtime_getset[] = {
    {"closed", (getter)Runtime_get_closed, NULL, "True once closed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject Runtime_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Runtime",
    .tp_basicsize = sizeof(RuntimeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Runtime(**settings): an adag runtime; each keyword is an ADAG_* setting, "
              "lowercased without its prefix (spin_ns=0 sets ADAG_SPIN_NS).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Runtime_init,
    .tp_dealloc = (destructor)Runtime_dealloc,
    .tp_methods = Runtime_methods,
    .tp_getset = Runtime_getset,
};

static PyMemberDef Actor_members[] = {
    {"name", T_OBJECT, offsetof(ActorObject, name), READONLY, "the actor's unique name"},
    {"pid", T_INT, offsetof(ActorObject, pid), READONLY,
     "the worker's process id (process actors), 0 for a thread actor"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject Actor_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Actor",
    .tp_basicsize = sizeof(ActorObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An actor (Runtime.actor).",
    .tp_dealloc = (destructor)Actor_dealloc,
    .tp_repr = (reprfunc)Actor_repr,
    .tp_members = Actor_members,
};

static PyMethodDef Graph_methods[] = {
    {"input", (PyCFunction)Graph_input, METH_O, "input(field) -> Node"},
    {"bind", (PyCFunction)Graph_bind, METH_VARARGS,
     "bind(actor, method, *nodes) -> Node, or a tuple of nodes for a method of several returns"},
    {"output", (PyCFunction)Graph_output, METH_VARARGS, "output(*nodes): the graph's outputs"},
    {"tensor", (PyCFunction)(void (*)(void))adagpy_graph_tensor, METH_VARARGS | METH_KEYWORDS,
     "tensor(node, dtype=None, shape=None, transport=None) -> node (adag_node_tensor)"},
    {"channel", (PyCFunction)(void (*)(void))adagpy_graph_channel, METH_VARARGS | METH_KEYWORDS,
     "channel(node, max_bytes=None, slots=None) -> node (adag_node_channel)"},
    {"allreduce", (PyCFunction)(void (*)(void))adagpy_graph_allreduce,
     METH_VARARGS | METH_KEYWORDS, "allreduce(nodes, op=\"sum\") -> a node per member"},
    {"allgather", (PyCFunction)(void (*)(void))adagpy_graph_allgather,
     METH_VARARGS | METH_KEYWORDS, "allgather(nodes) -> a node per member"},
    {"reducescatter", (PyCFunction)(void (*)(void))adagpy_graph_reducescatter,
     METH_VARARGS | METH_KEYWORDS, "reducescatter(nodes, op=\"sum\") -> a node per member"},
    {"broadcast", (PyCFunction)(void (*)(void))adagpy_graph_broadcast,
     METH_VARARGS | METH_KEYWORDS, "broadcast(nodes, root=0) -> a node per member"},
    {"compile", (PyCFunction)(void (*)(void))Graph_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(*, max_inflight, slot_capacity, execute_timeout, teardown_timeout, name, "
     "spin_ns, driver_device, trace_spans, run_ahead, graphs) -> CompiledDAG"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject Graph_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Graph",
    .tp_basicsize = sizeof(GraphObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A graph of bound methods (Runtime.graph).",
    .tp_dealloc = (destructor)Graph_dealloc,
    .tp_methods = Graph_methods,
};

PyTypeObject Node_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adag.Node",
    .tp_basicsize = sizeof(NodeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A value of a graph: an input field or a method's return.",
    .tp_dealloc = (destructor)Node_dealloc,
    .tp_methods = adagpy_node_methods,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, .m_name = "adag._adag",
    .m_doc = "adag's C API for Python: runtimes, actors, graphs, compiled DAGs.",
    .m_size = -1,
    .m_methods = adagpy_call_functions,
};

PyMODINIT_FUNC PyInit__adag(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    PyTypeObject *types[] = {&Runtime_Type, &Actor_Type, &Graph_Type, &Node_Type,
                             &Dag_Type, &Ref_Type, &Result_Type, &SlotView_Type,
                             &Reservation_Type, &Call_Type, &ArgView_Type};
    const char *names[] = {"Runtime", "Actor", "Graph", "Node", "CompiledDAG", "Ref", "Result",
                           "SlotView", "Reservation", "Call", "ArgView"};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0 ||
            PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    PyObject *api = adagpy_worker_api_capsule();
    int added = api ? PyModule_AddObjectRef(m, "_worker_api", api) : -1;
    Py_XDECREF(api);
    if (added < 0)
        goto fail;
    if (add_errors(m) < 0 || PyModule_AddStringConstant(m, "LIBDIR", ADAGPY_LIBDIR) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MAJOR", ADAG_VERSION_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "VERSION_MINOR", ADAG_VERSION_MINOR) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
