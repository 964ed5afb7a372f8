/*
 * The "devactor" class (device_actors.h): device-bound actor methods.
 * Built as a module (libdevice_actors.so, with ADAG_DEVICE_ACTORS_MODULE
 * defined) and into adag-tests for thread actors.
 */
#include "device_actors.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define LOG_MAX 64

/* the log is written by the stream's thread, read by methods after a fence */
typedef struct {
    int64_t log[LOG_MAX];
    _Atomic unsigned n;
} dev_state_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static adag_status_t arg_i64(adag_call_h call, int64_t *x)
{
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st != ADAG_OK)
        return st;
    if (v.size != sizeof(*x))
        return adag_call_fail(call, "expects one int64, got %zu bytes", v.size);
    memcpy(x, v.data, sizeof(*x));
    return ADAG_OK;
}

static adag_status_t out_i64(adag_call_h call, int64_t x)
{
    return adag_call_set_output(call, 0, &x, sizeof(x));
}

static adag_status_t dev_device(void *state, adag_call_h call)
{
    (void)state;
    return out_i64(call, adag_call_device(call));
}

static adag_status_t dev_has_stream(void *state, adag_call_h call)
{
    (void)state;
    return out_i64(call, adag_call_stream(call) != NULL);
}

typedef struct {
    dev_state_t *s;
    int64_t x;
} record_args_t;

static void append(dev_state_t *s, int64_t x)
{
    unsigned n = atomic_load(&s->n);
    if (n < LOG_MAX) {
        s->log[n] = x;
        atomic_store(&s->n, n + 1);
    }
}

static void record_kernel(void *p)
{
    record_args_t *a = p;
    sleep_ms(a->x > 0 ? a->x : 0);
    append(a->s, a->x);
}

static adag_status_t dev_record(void *state, adag_call_h call)
{
    record_args_t args = {.s = state};
    adag_status_t st = arg_i64(call, &args.x);
    if (st != ADAG_OK)
        return st;
    int64_t x = args.x;
    if ((st = adag_call_enqueue(call, record_kernel, &args, sizeof(args))) != ADAG_OK)
        return st;
    args.x = -999; /* the kernel has its own copy */
    __asm__ volatile("" : : "r"(&args) : "memory");
    return out_i64(call, x);
}

typedef struct {
    dev_state_t *s;
    const int64_t *in;
} late_args_t;

static void late_kernel(void *p)
{
    late_args_t *a = p;
    sleep_ms(200);
    append(a->s, *a->in);
}

/* Enqueues kernel(late_args_t) over the int64 input where it lies in its
 * slot. */
static adag_status_t enqueue_input_reader(void *state, adag_call_h call, void (*kernel)(void *))
{
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st != ADAG_OK)
        return st;
    if (v.size != sizeof(int64_t))
        return adag_call_fail(call, "expects one int64, got %zu bytes", v.size);
    late_args_t args = {.s = state, .in = v.data};
    return adag_call_enqueue(call, kernel, &args, sizeof(args));
}

/* late_read(x): a kernel reads the input in its slot 200 ms later */
static adag_status_t dev_late_read(void *state, adag_call_h call)
{
    adag_status_t st = enqueue_input_reader(state, call, late_kernel);
    return st == ADAG_OK ? out_i64(call, 0) : st;
}

static void post_kernel(void *p)
{
    sem_t *sem;
    memcpy(&sem, p, sizeof(sem));
    sem_post(sem);
}

/* Waits (in the method) until the work enqueued before is done. */
static adag_status_t fence(adag_call_h call)
{
    sem_t sem, *p = &sem;
    sem_init(&sem, 0, 0);
    adag_status_t st = adag_call_enqueue(call, post_kernel, &p, sizeof(p));
    if (st == ADAG_OK)
        while (sem_wait(&sem) != 0) {
        }
    sem_destroy(&sem);
    return st;
}

static adag_status_t dev_readlog(void *state, adag_call_h call)
{
    dev_state_t *s = state;
    adag_status_t st = fence(call);
    if (st != ADAG_OK)
        return st;
    unsigned n = atomic_load(&s->n);
    st = adag_call_set_output(call, 0, s->log, n * sizeof(int64_t));
    atomic_store(&s->n, 0);
    return st;
}

typedef struct {
    int64_t ms;
} slow_args_t;

static void slow_kernel(void *p)
{
    sleep_ms(((slow_args_t *)p)->ms);
}

static adag_status_t dev_slow(void *state, adag_call_h call)
{
    (void)state;
    int64_t t = now_ns();
    slow_args_t args;
    adag_status_t st = arg_i64(call, &args.ms);
    if (st == ADAG_OK)
        st = adag_call_enqueue(call, slow_kernel, &args, sizeof(args));
    return st == ADAG_OK ? out_i64(call, t) : st;
}

static adag_status_t dev_drain(void *state, adag_call_h call)
{
    (void)state;
    int64_t x = 0;
    adag_status_t st = arg_i64(call, &x);
    if (st == ADAG_OK)
        st = fence(call);
    return st == ADAG_OK ? out_i64(call, x) : st;
}

static void nop_kernel(void *p)
{
    (void)p;
}

static adag_status_t dev_try_enqueue(void *state, adag_call_h call)
{
    (void)state;
    static const unsigned char big[257];
    int64_t x = 0;
    adag_status_t st = arg_i64(call, &x);
    if (st != ADAG_OK)
        return st;
    switch (x) {
    case 0:
        st = adag_call_enqueue(call, nop_kernel, big, 8);
        break;
    case 1:
        st = adag_call_enqueue(call, NULL, big, 8);
        break;
    default:
        st = adag_call_enqueue(call, nop_kernel, big, sizeof(big));
        break;
    }
    return st == ADAG_OK ? out_i64(call, x) : st;
}

typedef struct {
    int64_t ms;
    int64_t *out; /* the return's host buffer */
} stamp_args_t;

static void late_stamp_kernel(void *p)
{
    stamp_args_t *a = p;
    sleep_ms(a->ms);
    *a->out = now_ns();
}

/* late_stamp(ms) -> the time a kernel that first sleeps ms wrote into the
 * return's host buffer (adag_call_output: the return is not declared) */
static adag_status_t dev_late_stamp(void *state, adag_call_h call)
{
    (void)state;
    stamp_args_t args;
    adag_status_t st = arg_i64(call, &args.ms);
    if (st != ADAG_OK)
        return st;
    void *out;
    if ((st = adag_call_output(call, 0, sizeof(int64_t), &out)) != ADAG_OK)
        return st;
    args.out = out;
    *args.out = 0;
    return adag_call_enqueue(call, late_stamp_kernel, &args, sizeof(args));
}

typedef struct {
    const int64_t *in;
    int64_t *out;
    size_t n;
    int64_t us;
} affine_args_t;

static void affine_kernel(void *p)
{
    affine_args_t *a = p;
    struct timespec ts = {0, (long)(a->us * 1000)};
    nanosleep(&ts, NULL);
    for (size_t i = 0; i < a->n; i++)
        a->out[i] = a->in[i] * 3 + 1;
}

/* affine_host(v) -> v * 3 + 1 for each int64 of v, computed by a kernel
 * (which first sleeps 300 us) from the input slot into the return's host
 * buffer: neither value is declared a tensor */
static adag_status_t dev_affine_host(void *state, adag_call_h call)
{
    (void)state;
    adag_value_t v;
    adag_status_t st = adag_call_arg(call, 0, &v);
    if (st != ADAG_OK)
        return st;
    if (v.size % sizeof(int64_t))
        return adag_call_fail(call, "expects int64s, got %zu bytes", v.size);
    void *out;
    if ((st = adag_call_output(call, 0, v.size, &out)) != ADAG_OK)
        return st;
    affine_args_t args = {v.data, out, v.size / sizeof(int64_t), 300};
    return adag_call_enqueue(call, affine_kernel, &args, sizeof(args));
}

static void log_late_kernel(void *p)
{
    late_args_t *a = p;
    sleep_ms(2);
    append(a->s, *a->in);
}

/* log_late(x) -> an i64 tensor [1] on the device that nothing writes (declare
 * it); a kernel appends x to the log, read from the input slot 2 ms after
 * the method returned */
static adag_status_t dev_log_late(void *state, adag_call_h call)
{
    const int64_t shape[1] = {1};
    void *out;
    adag_status_t st = adag_call_output_tensor(call, 0, ADAG_DTYPE_I64, 1, shape, &out);
    return st == ADAG_OK ? enqueue_input_reader(state, call, log_late_kernel) : st;
}

static const adag_method_def_t dev_methods[] = {
    {.name = "device", .fn = dev_device, .nargs = 1, .nreturns = 1},
    {.name = "has_stream", .fn = dev_has_stream, .nargs = 1, .nreturns = 1},
    {.name = "record", .fn = dev_record, .nargs = 1, .nreturns = 1},
    {.name = "readlog", .fn = dev_readlog, .nargs = 1, .nreturns = 1},
    {.name = "slow", .fn = dev_slow, .nargs = 1, .nreturns = 1},
    {.name = "drain", .fn = dev_drain, .nargs = 1, .nreturns = 1},
    {.name = "try_enqueue", .fn = dev_try_enqueue, .nargs = 1, .nreturns = 1},
    {.name = "late_read", .fn = dev_late_read, .nargs = 1, .nreturns = 1},
    {.name = "late_stamp", .fn = dev_late_stamp, .nargs = 1, .nreturns = 1},
    {.name = "affine_host", .fn = dev_affine_host, .nargs = 1, .nreturns = 1},
    {.name = "log_late", .fn = dev_log_late, .nargs = 1, .nreturns = 1},
};

const adag_class_def_t test_device_class = {
    .abi_version = ADAG_ABI_VERSION,
    .name = "devactor",
    .state_size = sizeof(dev_state_t),
    .methods = dev_methods,
    .nmethods = sizeof(dev_methods) / sizeof(dev_methods[0]),
};

#ifdef ADAG_DEVICE_ACTORS_MODULE
#include "graph_actors.h"
ADAG_MODULE(&test_device_class, &test_graph_class);
#endif
