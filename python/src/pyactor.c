/*
 * Python classes as actor classes. A class written in Python becomes an
 * adag_class_def_t whose methods are trampolines: tramp_<i> runs method i
 * of the actor's class with the GIL held (PyGILState_Ensure: the loop
 * threads that call methods are not Python's), its inputs as views of the
 * channel slots (bytes as read-only memoryviews, host tensors as numpy
 * arrays), and puts what it returns into the output slots. An exception
 * fails that execution (adag_call_fail) with its type, message and last
 * frames (adag/_actor.py: explain).
 *
 * Two ways in:
 *   - thread actors: Runtime.actor(cls, placement="thread") makes the class
 *     in this process and registers it (adag_class_register) once per
 *     runtime; the init bytes carry a pointer to the class and its
 *     arguments (thread_init_t), alive during adag_actor_create;
 *   - process actors: adag-worker loads the package's worker module
 *     (python/src/worker/pyworker.c), which asks resolve_class here
 *     (pyactor.h) with the init bytes adag/_actor.py packed: the class is
 *     imported in the worker, and its init unpickles the arguments.
 */
#include "adagpy.h"
#include "pyactor.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>

#define MAX_METHODS 128 /* the trampolines below; adag/_actor.py: MAX_METHODS */
/* what a message of ours keeps: adag keeps 256 bytes of an init's
 * message and more of a method's */
#define TEXT_MAX 256
#define THREAD_INIT_MAGIC 0x41505954u /* "TYPA" */

typedef struct {
    adag_class_def_t def;
    adag_method_def_t methods[MAX_METHODS];
    char name[ADAG_MAX_NAME];
    char method_names[MAX_METHODS][ADAG_MAX_NAME];
    PyObject *cls;
    PyObject *funcs[MAX_METHODS];
} pyclass_t;

/* an actor's state (state_size of the class) */
typedef struct {
    PyObject *self;
    pyclass_t *cls;
} pystate_t;

/* a thread actor's init bytes: borrowed references, alive while
 * adag_actor_create runs init on the creating thread */
typedef struct {
    uint32_t magic;
    pyclass_t *cls;
    PyObject *args, *kwargs;
} thread_init_t;

static PyObject *actor_helpers; /* adag._actor */
static PyObject *np_asarray;     /* numpy.asarray, or None without numpy */
static pyclass_t *worker_class;  /* the class a worker process resolved */

/* ---- the method running on this thread ---- */

_Thread_local adag_call_h adagpy_cur_call;
_Thread_local CallObject *adagpy_cur_obj;

static PyObject *helpers(void)
{
    if (!actor_helpers)
        actor_helpers = PyImport_ImportModule("adag._actor");
    return actor_helpers;
}

static PyObject *asarray(void)
{
    if (!np_asarray) {
        PyObject *np = PyImport_ImportModule("numpy");
        if (np) {
            np_asarray = PyObject_GetAttrString(np, "asarray");
            Py_DECREF(np);
        }
        if (!np_asarray) {
            PyErr_Clear();
            np_asarray = Py_NewRef(Py_None);
        }
    }
    return np_asarray;
}

/* The pending exception as one line ("Type: message (at file:line in f)"),
 * cleared. */
static void exception_text(char *out, size_t n)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value && tb)
        PyException_SetTraceback(value, tb);
    PyObject *h = helpers(), *text = NULL;
    if (h && value)
        text = PyObject_CallMethod(h, "explain", "O", value);
    const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(out, n, "%s", s ? s : "(an exception that cannot be printed)");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
}

/* A view of memory as a numpy array (a memoryview without numpy), with
 * the tensor's format and shape; writable or not. */
PyObject *adagpy_array_view(void *data, size_t size, adag_dtype_t dtype, unsigned ndim,
                            const int64_t *shape, int writable)
{
    static char empty[1];
    Py_ssize_t sh[ADAG_MAX_DIMS];
    for (unsigned i = 0; i < ndim; i++)
        sh[i] = (Py_ssize_t)shape[i];
    Py_buffer b = {
        .buf = data ? data : empty,
        .len = (Py_ssize_t)size,
        .readonly = !writable,
        .itemsize = dtype == ADAG_DTYPE_BYTES ? 1 : (Py_ssize_t)adag_dtype_size(dtype),
        .format = (char *)adagpy_dtype_format(dtype),
        .ndim = (int)ndim,
        .shape = sh,
    };
    PyObject *mv = PyMemoryView_FromBuffer(&b);
    PyObject *np = mv ? asarray() : NULL;
    if (!np || np == Py_None)
        return mv;
    PyObject *arr = PyObject_CallOneArg(np, mv);
    Py_DECREF(mv);
    return arr;
}

/* An input as a Python object: bytes as a read-only memoryview, a tensor
 * in host memory (or the emulated device's, which is host memory) as a
 * read-only numpy array viewing the slot, a tensor in cuda memory as an
 * ArgView (DLPack: torch.from_dlpack). */
static PyObject *arg_object(const adag_value_t *v, unsigned i, void *stream)
{
    if (v->kind == ADAG_VALUE_BYTES)
        return PyMemoryView_FromMemory(v->size ? (char *)v->data : (char *)"",
                                       (Py_ssize_t)v->size, PyBUF_READ);
    if (ADAG_DEVICE_KIND(v->device) == ADAG_DEV_CUDA) /* numpy cannot view it: DLPack */
        return adagpy_argview_new(v, i, stream, 0);
    return adagpy_array_view((void *)v->data, v->size, v->dtype, v->ndim, v->shape, 0);
}

/* ---- returns ---- */

/* A numpy conversion of what a method returned that is not bytes or an
 * array (a number, a list, a non-contiguous array): numpy.asarray(o,
 * order="C"); NULL with an exception set. */
static PyObject *as_contiguous(PyObject *o)
{
    PyObject *np = asarray();
    if (np == Py_None) {
        PyErr_SetString(PyExc_TypeError, "numpy is not installed to convert it");
        return NULL;
    }
    PyObject *args = PyTuple_Pack(1, o), *kw = Py_BuildValue("{s:s}", "order", "C");
    PyObject *r = args && kw ? PyObject_Call(np, args, kw) : NULL;
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return r;
}

/* Copies what a method returned into output i: bytes-like objects as
 * bytes, a buffer with a format (a numpy array) or a DLPack tensor in
 * host memory as a tensor of its dtype and shape (what execute takes:
 * adagpy_input_take), anything else through numpy.ascontiguousarray.
 * None is an empty value. */
static adag_status_t put_output(adag_call_h call, unsigned i, PyObject *o)
{
    void *buf;
    if (o == Py_None)
        return adag_call_output(call, i, 0, &buf);
    adag_value_t v;
    adagpy_input_t hold;
    PyObject *conv = NULL;
    if (adagpy_input_take(NULL, o, "return", i, &v, &hold) < 0) {
        /* not an array of adag's (a number, a list, a strided view): numpy's */
        char first[TEXT_MAX];
        exception_text(first, sizeof(first));
        if (!(conv = as_contiguous(o)) ||
            adagpy_input_take(NULL, conv, "return", i, &v, &hold) < 0) {
            Py_XDECREF(conv);
            PyErr_Clear();
            return adag_call_fail(call, "return %u (a %s) is not bytes or an array adag carries: "
                                  "%s", i, Py_TYPE(o)->tp_name, first);
        }
    }
    adag_status_t st;
    if (v.kind == ADAG_VALUE_BYTES) {
        st = adag_call_set_output(call, i, v.data, v.size);
    } else if (v.device != ADAG_DEVICE_HOST) {
        st = adag_call_fail(call, "return %u is a tensor in device memory: write a device "
                            "return in place (adag.current_call().output) or return host memory",
                            i);
    } else {
        st = adag_call_output_tensor(call, i, v.dtype, v.ndim, v.shape, &buf);
        if (st == ADAG_OK && v.size)
            memcpy(buf, v.data, v.size);
    }
    adagpy_input_drop(&hold);
    Py_XDECREF(conv);
    return st;
}

static adag_status_t put_returns(adag_call_h call, const adag_method_def_t *m, PyObject *r,
                                 uint32_t written, PyObject *const *views)
{
    PyObject *seq = NULL;
    adag_status_t st = ADAG_OK;
    if (m->nreturns > 1) {
        seq = PyTuple_Check(r) || PyList_Check(r) ? PySequence_Tuple(r) : NULL;
        if (!seq || PyTuple_GET_SIZE(seq) != (Py_ssize_t)m->nreturns) {
            PyErr_Clear();
            st = adag_call_fail(call, "returned %s, not a tuple of its %u returns",
                                seq ? "a tuple of another length" : Py_TYPE(r)->tp_name,
                                m->nreturns);
            goto out;
        }
    }
    for (unsigned i = 0; i < m->nreturns && st == ADAG_OK; i++) {
        PyObject *o = seq ? PyTuple_GET_ITEM(seq, i) : r;
        if (written & (1u << i)) {
            if (o != Py_None && o != views[i])
                st = adag_call_fail(call, "return %u was written in place (call.output) "
                                    "and also returned: return None or the array output() "
                                    "gave", i);
            continue;
        }
        st = put_output(call, i, o);
    }
out:
    Py_XDECREF(seq);
    return st;
}

/* ---- the GIL on a loop thread ---- */

/* A loop thread that runs Python methods keeps its Python thread state
 * from its first method to its exit: PyGILState_Ensure on a thread
 * without one makes one and PyGILState_Release at count 0 deletes it,
 * which costs microseconds on every method. The first method's Ensure is
 * kept (the count stays 1, the GIL dropped with PyEval_SaveThread), so
 * each method's own Ensure/Release only takes and drops the GIL; the
 * thread's exit (the key's destructor) releases the kept one. */
static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

static void kept_release(void *state)
{
    PyThreadState *ts = state;
    if (!ts || !Py_IsInitialized())
        return; /* the interpreter is gone: nothing to give back */
    /* (the thread's gilstate key may be cleared already: the state is
     * deleted as itself, not through PyGILState_Release) */
    PyEval_RestoreThread(ts);
    PyThreadState_Clear(ts);
    PyThreadState_DeleteCurrent(); /* and the GIL with it */
}

static void kept_key_make(void)
{
    (void)pthread_key_create(&kept_key, kept_release);
}

static PyGILState_STATE gil_take(void)
{
    (void)pthread_once(&kept_once, kept_key_make);
    if (!pthread_getspecific(kept_key) && !PyGILState_GetThisThreadState()) {
        (void)PyGILState_Ensure(); /* this thread's state, kept */
        (void)pthread_setspecific(kept_key, PyEval_SaveThread());
    }
    return PyGILState_Ensure();
}

/* ---- methods ---- */

static void post_done(void *args)
{
    sem_t *done;
    memcpy(&done, args, sizeof(done));
    sem_post(done);
}

/* A method of an emulated-device actor reads its device arguments from
 * the host (numpy views): the stream's work so far, which brings them,
 * must have run. Waits for it (not holding the GIL) when an argument is
 * in emulated-device memory; on cuda the method orders its own work on
 * the stream instead (ArgView, torch). */
static adag_status_t wait_device_args(adag_call_h call, unsigned nargs)
{
    int32_t dev = adag_call_device(call);
    if (ADAG_DEVICE_KIND(dev) != ADAG_DEV_EMULATED)
        return ADAG_OK;
    int any = 0;
    for (unsigned i = 0; i < nargs && !any; i++) {
        adag_value_t v;
        any = adag_call_arg(call, i, &v) == ADAG_OK && v.device != ADAG_DEVICE_HOST;
    }
    if (!any)
        return ADAG_OK;
    sem_t done, *p = &done;
    sem_init(&done, 0, 0);
    adag_status_t st = adag_call_enqueue(call, post_done, &p, sizeof(p));
    if (st == ADAG_OK)
        while (sem_wait(&done) != 0)
            ; /* EINTR */
    sem_destroy(&done);
    return st;
}

static adag_status_t dispatch(void *state, adag_call_h call, unsigned mi)
{
    pystate_t *s = state;
    pyclass_t *c = s->cls;
    const adag_method_def_t *m = &c->methods[mi];
    PyObject *argv[1 + ADAG_MAX_ARGS] = {0};
    adag_status_t st = ADAG_OK;
    char text[2 * TEXT_MAX];
    unsigned n = 0;

    if ((st = wait_device_args(call, m->nargs)) != ADAG_OK)
        return st;
    PyGILState_STATE gil = gil_take();
    adag_call_h outer_call = adagpy_cur_call; /* a method of a thread actor may run DAGs too */
    CallObject *outer_obj = adagpy_cur_obj;
    adagpy_cur_call = call;
    adagpy_cur_obj = NULL;
    argv[0] = s->self;
    for (n = 0; n < m->nargs; n++) {
        adag_value_t v;
        if ((st = adag_call_arg(call, n, &v)) != ADAG_OK)
            goto out;
        if (!(argv[1 + n] = arg_object(&v, n, adag_call_stream(call)))) {
            exception_text(text, sizeof(text));
            st = adag_call_fail(call, "argument %u: %s", n, text);
            goto out;
        }
    }
    PyObject *r = PyObject_Vectorcall(c->funcs[mi], argv, 1 + n, NULL);
    if (!r) {
        exception_text(text, sizeof(text));
        st = adag_call_fail(call, "%s", text);
        goto out;
    }
    CallObject *co = adagpy_cur_obj;
    st = put_returns(call, m, r, co ? co->written : 0, co ? co->views : NULL);
    Py_DECREF(r);
out:
    for (unsigned i = 1; i <= n && i <= m->nargs; i++) {
        if (argv[i] && Py_IS_TYPE(argv[i], &ArgView_Type))
            adagpy_argview_end(argv[i]);
        Py_XDECREF(argv[i]);
    }
    if (adagpy_cur_obj) {
        adagpy_call_end(adagpy_cur_obj);
        Py_DECREF(adagpy_cur_obj);
    }
    adagpy_cur_call = outer_call;
    adagpy_cur_obj = outer_obj;
    PyGILState_Release(gil);
    return st;
}

#define TRAMPOLINE(i)                                                                          \
    static adag_status_t tramp_##i(void *state, adag_call_h call)                             \
    {                                                                                          \
        return dispatch(state, call, i);                                                       \
    }
TRAMPOLINE(0) TRAMPOLINE(1) TRAMPOLINE(2) TRAMPOLINE(3) TRAMPOLINE(4) TRAMPOLINE(5) TRAMPOLINE(6) TRAMPOLINE(7)
TRAMPOLINE(8) TRAMPOLINE(9) TRAMPOLINE(10) TRAMPOLINE(11) TRAMPOLINE(12) TRAMPOLINE(13) TRAMPOLINE(14) TRAMPOLINE(15)
TRAMPOLINE(16) TRAMPOLINE(17) TRAMPOLINE(18) TRAMPOLINE(19) TRAMPOLINE(20) TRAMPOLINE(21) TRAMPOLINE(22) TRAMPOLINE(23)
TRAMPOLINE(24) TRAMPOLINE(25) TRAMPOLINE(26) TRAMPOLINE(27) TRAMPOLINE(28) TRAMPOLINE(29) TRAMPOLINE(30) TRAMPOLINE(31)
TRAMPOLINE(32) TRAMPOLINE(33) TRAMPOLINE(34) TRAMPOLINE(35) TRAMPOLINE(36) TRAMPOLINE(37) TRAMPOLINE(38) TRAMPOLINE(39)
TRAMPOLINE(40) TRAMPOLINE(41) TRAMPOLINE(42) TRAMPOLINE(43) TRAMPOLINE(44) TRAMPOLINE(45) TRAMPOLINE(46) TRAMPOLINE(47)
TRAMPOLINE(48) TRAMPOLINE(49) TRAMPOLINE(50) TRAMPOLINE(51) TRAMPOLINE(52) TRAMPOLINE(53) TRAMPOLINE(54) TRAMPOLINE(55)
TRAMPOLINE(56) TRAMPOLINE(57) TRAMPOLINE(58) TRAMPOLINE(59) TRAMPOLINE(60) TRAMPOLINE(61) TRAMPOLINE(62) TRAMPOLINE(63)
TRAMPOLINE(64) TRAMPOLINE(65) TRAMPOLINE(66) TRAMPOLINE(67) TRAMPOLINE(68) TRAMPOLINE(69) TRAMPOLINE(70) TRAMPOLINE(71)
TRAMPOLINE(72) TRAMPOLINE(73) TRAMPOLINE(74) TRAMPOLINE(75) TRAMPOLINE(76) TRAMPOLINE(77) TRAMPOLINE(78) TRAMPOLINE(79)
TRAMPOLINE(80) TRAMPOLINE(81) TRAMPOLINE(82) TRAMPOLINE(83) TRAMPOLINE(84) TRAMPOLINE(85) TRAMPOLINE(86) TRAMPOLINE(87)
TRAMPOLINE(88) TRAMPOLINE(89) TRAMPOLINE(90) TRAMPOLINE(91) TRAMPOLINE(92) TRAMPOLINE(93) TRAMPOLINE(94) TRAMPOLINE(95)
TRAMPOLINE(96) TRAMPOLINE(97) TRAMPOLINE(98) TRAMPOLINE(99) TRAMPOLINE(100) TRAMPOLINE(101) TRAMPOLINE(102) TRAMPOLINE(103)
TRAMPOLINE(104) TRAMPOLINE(105) TRAMPOLINE(106) TRAMPOLINE(107) TRAMPOLINE(108) TRAMPOLINE(109) TRAMPOLINE(110) TRAMPOLINE(111)
TRAMPOLINE(112) TRAMPOLINE(113) TRAMPOLINE(114) TRAMPOLINE(115) TRAMPOLINE(116) TRAMPOLINE(117) TRAMPOLINE(118) TRAMPOLINE(119)
TRAMPOLINE(120) TRAMPOLINE(121) TRAMPOLINE(122) TRAMPOLINE(123) TRAMPOLINE(124) TRAMPOLINE(125) TRAMPOLINE(126) TRAMPOLINE(127)
static const adag_method_fn trampolines[MAX_METHODS] = {
    tramp_0, tramp_1, tramp_2, tramp_3, tramp_4, tramp_5, tramp_6, tramp_7,
    tramp_8, tramp_9, tramp_10, tramp_11, tramp_12, tramp_13, tramp_14, tramp_15,
    tramp_16, tramp_17, tramp_18, tramp_19, tramp_20, tramp_21, tramp_22, tramp_23,
    tramp_24, tramp_25, tramp_26, tramp_27, tramp_28, tramp_29, tramp_30, tramp_31,
    tramp_32, tramp_33, tramp_34, tramp_35, tramp_36, tramp_37, tramp_38, tramp_39,
    tramp_40, tramp_41, tramp_42, tramp_43, tramp_44, tramp_45, tramp_46, tramp_47,
    tramp_48, tramp_49, tramp_50, tramp_51, tramp_52, tramp_53, tramp_54, tramp_55,
    tramp_56, tramp_57, tramp_58, tramp_59, tramp_60, tramp_61, tramp_62, tramp_63,
    tramp_64, tramp_65, tramp_66, tramp_67, tramp_68, tramp_69, tramp_70, tramp_71,
    tramp_72, tramp_73, tramp_74, tramp_75, tramp_76, tramp_77, tramp_78, tramp_79,
    tramp_80, tramp_81, tramp_82, tramp_83, tramp_84, tramp_85, tramp_86, tramp_87,
    tramp_88, tramp_89, tramp_90, tramp_91, tramp_92, tramp_93, tramp_94, tramp_95,
    tramp_96, tramp_97, tramp_98, tramp_99, tramp_100, tramp_101, tramp_102, tramp_103,
    tramp_104, tramp_105, tramp_106, tramp_107, tramp_108, tramp_109, tramp_110, tramp_111,
    tramp_112, tramp_113, tramp_114, tramp_115, tramp_116, tramp_117, tramp_118, tramp_119,
    tramp_120, tramp_121, tramp_122, tramp_123, tramp_124, tramp_125, tramp_126, tramp_127,
};

/* ---- classes ---- */

static void fini(void *state)
{
    pystate_t *s = state;
    if (!s->self || !Py_IsInitialized())
        return;
    PyGILState_STATE gil = PyGILState_Ensure();
    Py_CLEAR(s->self);
    PyGILState_Release(gil);
}

static adag_status_t thread_init(void *state, const void *data, size_t size)
{
    pystate_t *s = state;
    thread_init_t t;
    if (size != sizeof(t))
        return adag_init_fail("a Python thread actor's init bytes come from Runtime.actor");
    memcpy(&t, data, sizeof(t));
    if (t.magic != THREAD_INIT_MAGIC)
        return adag_init_fail("a Python thread actor's init bytes come from Runtime.actor");
    PyGILState_STATE gil = PyGILState_Ensure();
    adag_status_t st = ADAG_OK;
    s->cls = t.cls;
    s->self = PyObject_Call(t.cls->cls, t.args, t.kwargs);
    if (!s->self) {
        char text[TEXT_MAX];
        exception_text(text, sizeof(text));
        st = adag_init_fail("%s", text);
    }
    PyGILState_Release(gil);
    return st;
}

static adag_status_t process_init(void *state, const void *data, size_t size)
{
    pystate_t *s = state;
    PyGILState_STATE gil = PyGILState_Ensure();
    adag_status_t st = ADAG_OK;
    PyObject *bytes = PyBytes_FromStringAndSize(data, (Py_ssize_t)size), *h = helpers();
    s->cls = worker_class;
    s->self = bytes && h ? PyObject_CallMethod(h, "construct", "OO", worker_class->cls, bytes)
                         : NULL;
    if (!s->self) {
        char text[TEXT_MAX];
        exception_text(text, sizeof(text));
        st = adag_init_fail("%s", text);
    }
    Py_XDECREF(bytes);
    PyGILState_Release(gil);
    return st;
}

static void class_free(pyclass_t *c)
{
    if (!c)
        return;
    Py_XDECREF(c->cls);
    for (unsigned i = 0; i < MAX_METHODS; i++)
        Py_XDECREF(c->funcs[i]);
    PyMem_Free(c);
}

/* A class from adag._actor.describe's list [(name, function, nargs,
 * nreturns)]; NULL with an exception set. */
static pyclass_t *class_make(PyObject *cls, PyObject *methods, const char *name,
                             adag_status_t (*init)(void *, const void *, size_t))
{
    Py_ssize_t n = PyList_Check(methods) ? PyList_GET_SIZE(methods) : -1;
    if (n < 1 || n > MAX_METHODS) {
        PyErr_Format(PyExc_TypeError, "adag: class %s: 1..%d methods", name, MAX_METHODS);
        return NULL;
    }
    pyclass_t *c = PyMem_Calloc(1, sizeof(*c));
    if (!c)
        return (pyclass_t *)PyErr_NoMemory();
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->cls = Py_NewRef(cls);
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *mname;
        PyObject *fn;
        unsigned nargs, nret;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(methods, i), "sOII", &mname, &fn, &nargs, &nret)) {
            class_free(c);
            return NULL;
        }
        snprintf(c->method_names[i], ADAG_MAX_NAME, "%s", mname);
        c->funcs[i] = Py_NewRef(fn);
        c->methods[i] = (adag_method_def_t){c->method_names[i], trampolines[i], nargs, nret};
    }
    c->def = (adag_class_def_t){
        .abi_version = ADAG_ABI_VERSION,
        .name = c->name,
        .state_size = sizeof(pystate_t),
        .init = init,
        .fini = fini,
        .methods = c->methods,
        .nmethods = (unsigned)n,
    };
    return c;
}

static void class_capsule_free(PyObject *cap)
{
    class_free(PyCapsule_GetPointer(cap, "adag.pyclass"));
}

/* The class of cls registered in rt for thread actors (made once). */
static pyclass_t *thread_class(RuntimeObject *rt, PyObject *cls)
{
    PyObject *cap = PyDict_GetItemWithError(rt->modules, cls);
    if (cap)
        return PyCapsule_GetPointer(cap, "adag.pyclass");
    if (PyErr_Occurred())
        return NULL;
    PyObject *h = helpers();
    PyObject *methods = h ? PyObject_CallMethod(h, "describe", "O", cls) : NULL;
    PyObject *base = h && methods ? PyObject_CallMethod(h, "class_name", "O", cls) : NULL;
    pyclass_t *c = NULL;
    if (!base)
        goto out;
    /* a name no class of this runtime has: "<module>.<qualname>", then
     * "#2", "#3"... for other classes of the same name */
    char name[ADAG_MAX_NAME];
    snprintf(name, sizeof(name), "%s", PyUnicode_AsUTF8(base));
    adag_status_t st = ADAG_ERR_INVALID;
    for (unsigned k = 2; k < 1000 && st != ADAG_OK; k++) {
        if (!(c = class_make(cls, methods, name, thread_init)))
            goto out;
        st = adag_class_register(rt->rt, &c->def);
        if (st != ADAG_OK) {
            class_free(c);
            c = NULL;
            char suffix[16];
            int sl = snprintf(suffix, sizeof(suffix), "#%u", k);
            size_t bl = strlen(PyUnicode_AsUTF8(base));
            if (bl + (size_t)sl >= sizeof(name))
                bl = sizeof(name) - 1 - (size_t)sl;
            snprintf(name, sizeof(name), "%.*s%s", (int)bl, PyUnicode_AsUTF8(base), suffix);
        }
    }
    if (!c) {
        adagpy_raise(st, "Runtime.actor");
        goto out;
    }
    cap = PyCapsule_New(c, "adag.pyclass", class_capsule_free);
    if (!cap || PyDict_SetItem(rt->modules, cls, cap) < 0) {
        /* registered already: the class stays (leaked) with the runtime */
        Py_XDECREF(cap);
        c = NULL;
        goto out;
    }
    Py_DECREF(cap);
out:
    Py_XDECREF(methods);
    Py_XDECREF(base);
    return c;
}

int adagpy_python_actor(RuntimeObject *rt, PyObject *cls, PyObject *args, PyObject *kwargs,
                        int thread, adag_actor_params_t *p, PyObject **keep)
{
    PyObject *h = helpers();
    if (!h)
        return -1;
    if (!args)
        args = PyTuple_New(0);
    else if (!(args = PySequence_Tuple(args)))
        return -1;
    if (!args)
        return -1;
    if (kwargs && !PyDict_Check(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Runtime.actor: kwargs must be a dict");
        Py_DECREF(args);
        return -1;
    }
    if (thread) {
        pyclass_t *c = thread_class(rt, cls);
        if (!c) {
            Py_DECREF(args);
            return -1;
        }
        thread_init_t t = {THREAD_INIT_MAGIC, c, args, kwargs};
        /* keep: (init bytes, args) */
        PyObject *bytes = PyBytes_FromStringAndSize((const char *)&t, sizeof(t));
        *keep = bytes ? PyTuple_Pack(2, bytes, args) : NULL;
        Py_XDECREF(bytes);
        Py_DECREF(args);
        if (!*keep)
            return -1;
        p->class_name = c->name;
        p->init_data = PyBytes_AS_STRING(PyTuple_GET_ITEM(*keep, 0));
        p->init_size = sizeof(t);
        return 0;
    }
    PyObject *empty = kwargs ? NULL : PyDict_New();
    PyObject *init = PyObject_CallMethod(h, "init_bytes", "OOO", cls, args,
                                         kwargs ? kwargs : empty);
    PyObject *name = init ? PyObject_CallMethod(h, "class_name", "O", cls) : NULL;
    PyObject *module = name ? PyObject_GetAttrString(h, "WORKER_MODULE") : NULL;
    Py_XDECREF(empty);
    Py_DECREF(args);
    if (!module || !PyUnicode_Check(module)) {
        if (module)
            PyErr_SetString(PyExc_RuntimeError, "adag: no worker module for Python actors");
        Py_XDECREF(init);
        Py_XDECREF(name);
        Py_XDECREF(module);
        return -1;
    }
    *keep = PyTuple_Pack(3, init, name, module);
    Py_DECREF(init);
    Py_DECREF(name);
    Py_DECREF(module);
    if (!*keep)
        return -1;
    p->class_name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(*keep, 1));
    p->module_path = PyUnicode_AsUTF8(PyTuple_GET_ITEM(*keep, 2));
    p->init_data = PyBytes_AS_STRING(PyTuple_GET_ITEM(*keep, 0));
    p->init_size = (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(*keep, 0));
    return p->class_name && p->module_path ? 0 : -1;
}

/* ---- a worker process: the class its actor asks for ---- */

static adag_status_t resolve_class(const char *class_name, const void *init, size_t size,
                                   const adag_class_def_t **def)
{
    char text[2 * TEXT_MAX];
    PyObject *h = helpers();
    PyObject *bytes = h ? PyBytes_FromStringAndSize(init, (Py_ssize_t)size) : NULL;
    PyObject *r = bytes ? PyObject_CallMethod(h, "resolve", "O", bytes) : NULL;
    Py_XDECREF(bytes);
    if (!r) {
        int missing = PyErr_ExceptionMatches(PyExc_ImportError) ||
                      PyErr_ExceptionMatches(PyExc_AttributeError);
        exception_text(text, sizeof(text));
        return adag_fail(missing ? ADAG_ERR_NOT_FOUND : ADAG_ERR_INVALID,
                         "cannot make Python class %s: %s", class_name, text);
    }
    pyclass_t *c = NULL;
    PyObject *cls, *methods;
    if (PyArg_ParseTuple(r, "OO", &cls, &methods))
        c = class_make(cls, methods, class_name, process_init);
    Py_DECREF(r);
    if (!c) {
        exception_text(text, sizeof(text));
        return adag_fail(ADAG_ERR_INVALID, "cannot make Python class %s: %s", class_name, text);
    }
    worker_class = c; /* a worker hosts one actor: the class lives as long */
    *def = &c->def;
    return ADAG_OK;
}

static const adagpy_worker_api_t worker_api = {ADAGPY_WORKER_API_VERSION, resolve_class};

PyObject *adagpy_worker_api_capsule(void)
{
    return PyCapsule_New((void *)&worker_api, ADAGPY_WORKER_API_CAPSULE, NULL);
}
