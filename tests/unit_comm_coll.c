/* Unit tests (suite "comm_coll"): the communicators' collectives
 * (gpu/comm.h: allreduce, allgather, reducescatter, broadcast) over every
 * backend (COMM_TEST_IN; nccl skips without enough CUDA devices), ranks in
 * threads and in forked processes, against a reference written here: each
 * element reduced in rank order, in plain C (f16 through the compiler's
 * _Float16, bf16 by a conversion of this file's own). The host backend
 * must match it bit for bit; NCCL integers exactly, NCCL floats within
 * FLOAT_TOLERANCE (relative) since NCCL's order of reduction is its own.
 * Every test ends with no communicator, id or stream left. */
#include "gpu/comm.h"
#include "gpu/comm_host.h"
#include "gpu/device.h"
#include "comm_rig.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COMM_TEST(name, tmo) COMM_TEST_IN(comm_coll, name, tmo)
#define MAX_RANKS 5
#define FLOAT_TOLERANCE 1e-2

enum { ALLREDUCE, ALLGATHER, REDUCESCATTER, BROADCAST, NKINDS };
static const char *const kind_names[NKINDS] = {"allreduce", "allgather", "reducescatter",
                                               "broadcast"};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};

/* One collective call: what every rank enqueues (root: broadcast's). */
typedef struct {
    int kind;
    adag_dtype_t dtype;
    adag_reduce_op_t op;
    size_t count;
    unsigned root;
    int in_place;
    unsigned seed;
} call_t;

/* ---- the reference ---- */

/* 2^e for -126 <= e <= 127 (0 below: no such value occurs here). */
static float pow2f(int e)
{
    uint32_t bits = e < -126 ? 0 : (uint32_t)(e + 127) << 23;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

static float bf16_to_float(uint16_t h)
{
    /* finite only: (128 + man) * 2^(exp - 134), or man * 2^-133 if exp is 0 */
    int exp = h >> 7 & 0xff, man = h & 0x7f;
    float mag = exp ? (float)(128 + man) * pow2f(exp - 134) : (float)man * pow2f(-126) / 128;
    return (h & 0x8000) ? -mag : mag;
}

/* Nearest bf16 (ties to even) of a finite f: the two candidates around it
 * compared as doubles. */
static uint16_t float_to_bf16(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    uint16_t lo = (uint16_t)(bits >> 16), hi = (uint16_t)(lo + 1);
    double dlo = __builtin_fabs((double)f - bf16_to_float(lo)), dhi = __builtin_fabs((double)f - bf16_to_float(hi));
    if (dlo < dhi || (dlo == dhi && (lo & 1) == 0))
        return lo;
    return hi;
}

/* Element i of rank r's send buffer for call c (finite values; floats
 * with fractions, so rounding matters; bools are 0, 1 and sometimes 2). */
static void element(const call_t *c, unsigned r, size_t i, void *out)
{
    uint64_t h = (i + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(r + 1) * 0xc2b2ae3d27d4eb4full ^
                 (uint64_t)c->seed * 0x165667b19e3779f9ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    double v = ((double)(int)(h % 2001) - 1000.0) / 37.0;
    switch (c->dtype) {
    case ADAG_DTYPE_F16: {
        _Float16 x = (_Float16)(float)v;
        memcpy(out, &x, 2);
        return;
    }
    case ADAG_DTYPE_BF16: {
        uint16_t x = float_to_bf16((float)v);
        memcpy(out, &x, 2);
        return;
    }
    case ADAG_DTYPE_F32: {
        float x = (float)v;
        memcpy(out, &x, 4);
        return;
    }
    case ADAG_DTYPE_F64:
        memcpy(out, &v, 8);
        return;
    case ADAG_DTYPE_BOOL:
        *(uint8_t *)out = (uint8_t)(h % 7 == 0 ? 2 : h % 3 != 0);
        return;
    default:
        memcpy(out, &h, adag_dtype_size(c->dtype));
        return;
    }
}

#define PICK(a, b, op) ((op) == ADAG_REDUCE_MIN ? ((b) < (a) ? (b) : (a)) : ((b) > (a) ? (b) : (a)))

/* acc = acc op x, for one element of the call's dtype. */
static void ref_step(const call_t *c, void *acc, const void *x)
{
    adag_reduce_op_t op = c->op;
    int sum = op == ADAG_REDUCE_SUM || op == ADAG_REDUCE_AVG, prod = op == ADAG_REDUCE_PROD;
#define INT_STEP(S, U)                                                                         \
    {                                                                                          \
        S a, b;                                                                                \
        memcpy(&a, acc, sizeof(a));                                                            \
        memcpy(&b, x, sizeof(b));                                                              \
        U ua = (U)a, ub = (U)b;                                                                \
        S res = sum ? (S)(U)(ua + ub) : prod ? (S)(U)((uint64_t)ua * (uint64_t)ub) : PICK(a, b, op); \
        memcpy(acc, &res, sizeof(res));                                                        \
        return;                                                                                \
    }
    switch (c->dtype) {
    case ADAG_DTYPE_U8:
        INT_STEP(uint8_t, uint8_t)
    case ADAG_DTYPE_I8:
        INT_STEP(int8_t, uint8_t)
    case ADAG_DTYPE_I16:
        INT_STEP(int16_t, uint16_t)
    case ADAG_DTYPE_I32:
        INT_STEP(int32_t, uint32_t)
    case ADAG_DTYPE_I64:
        INT_STEP(int64_t, uint64_t)
    case ADAG_DTYPE_F16: {
        _Float16 a, b;
        memcpy(&a, acc, 2);
        memcpy(&b, x, 2);
        float fa = a, fb = b;
        _Float16 res = (_Float16)(sum ? fa + fb : prod ? fa * fb : PICK(fa, fb, op));
        memcpy(acc, &res, 2);
        return;
    }
    case ADAG_DTYPE_BF16: {
        uint16_t a, b;
        memcpy(&a, acc, 2);
        memcpy(&b, x, 2);
        float fa = bf16_to_float(a), fb = bf16_to_float(b);
        uint16_t res = float_to_bf16(sum ? fa + fb : prod ? fa * fb : PICK(fa, fb, op));
        memcpy(acc, &res, 2);
        return;
    }
    case ADAG_DTYPE_F32: {
        float a, b, res;
        memcpy(&a, acc, 4);
        memcpy(&b, x, 4);
        res = sum ? a + b : prod ? a * b : PICK(a, b, op);
        memcpy(acc, &res, 4);
        return;
    }
    case ADAG_DTYPE_F64: {
        double a, b, res;
        memcpy(&a, acc, 8);
        memcpy(&b, x, 8);
        res = sum ? a + b : prod ? a * b : PICK(a, b, op);
        memcpy(acc, &res, 8);
        return;
    }
    case ADAG_DTYPE_BOOL: {
        uint8_t a = *(uint8_t *)acc != 0, b = *(const uint8_t *)x != 0;
        *(uint8_t *)acc = (op == ADAG_REDUCE_SUM || op == ADAG_REDUCE_MAX) ? (a || b) : (a && b);
        return;
    }
    default:
        return;
    }
#undef INT_STEP
}

static void ref_average(const call_t *c, void *acc, unsigned n)
{
    switch (c->dtype) {
#define DIV(T)                                                                                 \
    {                                                                                          \
        T a;                                                                                   \
        memcpy(&a, acc, sizeof(a));                                                            \
        a = (T)(a / (T)n);                                                                     \
        memcpy(acc, &a, sizeof(a));                                                            \
        return;                                                                                \
    }
    case ADAG_DTYPE_U8:
        DIV(uint8_t)
    case ADAG_DTYPE_I8:
        DIV(int8_t)
    case ADAG_DTYPE_I16:
        DIV(int16_t)
    case ADAG_DTYPE_I32:
        DIV(int32_t)
    case ADAG_DTYPE_I64:
        DIV(int64_t)
    case ADAG_DTYPE_F32:
        DIV(float)
    case ADAG_DTYPE_F64:
        DIV(double)
#undef DIV
    case ADAG_DTYPE_F16: {
        _Float16 a;
        memcpy(&a, acc, 2);
        a = (_Float16)((float)a / (float)n);
        memcpy(acc, &a, 2);
        return;
    }
    case ADAG_DTYPE_BF16: {
        uint16_t a;
        memcpy(&a, acc, 2);
        a = float_to_bf16(bf16_to_float(a) / (float)n);
        memcpy(acc, &a, 2);
        return;
    }
    default:
        return;
    }
}

/* The reduction over ranks 0..n-1 (in that order) of element i. */
static void ref_reduce(const call_t *c, unsigned n, size_t i, void *out)
{
    unsigned char x[8];
    element(c, 0, i, out);
    for (unsigned r = 1; r < n; r++) {
        element(c, r, i, x);
        ref_step(c, out, x);
    }
    if (c->op == ADAG_REDUCE_AVG)
        ref_average(c, out, n);
}

/* Elements in rank `rank`'s send and recv buffers for call c. */
static size_t send_count(const call_t *c, unsigned n)
{
    return c->kind == REDUCESCATTER ? c->count * n : c->count;
}

static size_t recv_count(const call_t *c, unsigned n)
{
    return c->kind == ALLGATHER ? c->count * n : c->count;
}

/* What rank `rank`'s recv[j] must hold. */
static void expected(const call_t *c, unsigned n, unsigned rank, size_t j, void *out)
{
    switch (c->kind) {
    case ALLREDUCE:
        ref_reduce(c, n, j, out);
        return;
    case REDUCESCATTER:
        ref_reduce(c, n, rank * c->count + j, out);
        return;
    case ALLGATHER:
        element(c, (unsigned)(j / c->count), j % c->count, out);
        return;
    case BROADCAST:
        element(c, c->root, j, out);
        return;
    }
}

static int float_dtype(adag_dtype_t d)
{
    return d == ADAG_DTYPE_F16 || d == ADAG_DTYPE_BF16 || d == ADAG_DTYPE_F32 ||
           d == ADAG_DTYPE_F64;
}

static double as_double(adag_dtype_t d, const void *p)
{
    uint16_t h;
    float f;
    double v;
    switch (d) {
    case ADAG_DTYPE_F16: {
        _Float16 x;
        memcpy(&x, p, 2);
        return (double)x;
    }
    case ADAG_DTYPE_BF16:
        memcpy(&h, p, 2);
        return bf16_to_float(h);
    case ADAG_DTYPE_F32:
        memcpy(&f, p, 4);
        return f;
    default:
        memcpy(&v, p, 8);
        return v;
    }
}

/* Nonzero (err says where) if got is not what rank `rank` must receive.
 * exact: bit for bit; else floats within FLOAT_TOLERANCE. */
static int check_recv(const call_t *c, unsigned n, unsigned rank, const unsigned char *got,
                      int exact, char *err, size_t len)
{
    size_t es = adag_dtype_size(c->dtype);
    unsigned char want[8];
    for (size_t j = 0; j < recv_count(c, n); j++) {
        expected(c, n, rank, j, want);
        const unsigned char *g = got + j * es;
        if (memcmp(g, want, es) == 0)
            continue;
        if (!exact && float_dtype(c->dtype)) {
            double a = as_double(c->dtype, g), b = as_double(c->dtype, want);
            double scale = __builtin_fabs(b) > 1.0 ? __builtin_fabs(b) : 1.0;
            if (__builtin_fabs(a - b) <= FLOAT_TOLERANCE * scale)
                continue;
        }
        uint64_t gv = 0, wv = 0;
        memcpy(&gv, g, es);
        memcpy(&wv, want, es);
        snprintf(err, len, "rank %u: %s(count %zu, %s, %s, root %u%s) of %u ranks: element %zu "
                 "is 0x%llx, not 0x%llx", rank, kind_names[c->kind], c->count,
                 adag_dtype_name(c->dtype), op_names[c->op], c->root,
                 c->in_place ? ", in place" : "", n, j, (unsigned long long)gv,
                 (unsigned long long)wv);
        return 1;
    }
    return 0;
}

/* ---- a rank ---- */

typedef struct {
    const adag_comm_ops_t *ops;
    const adag_device_ops_t *d;
    adag_comm_id_t id;
    unsigned nranks, rank;
    adag_device_t *dev;
    adag_dev_stream_t *s;
    adag_dev_mem_t dsend, drecv, hbuf; /* device buffers, host staging */
    size_t cap;                        /* bytes of each */
    adag_comm_t *comm;
    adag_status_t init_st;
    const call_t *calls;
    size_t ncalls;
    char err[512];
} rank_t;

static int rank_open(rank_t *r, const adag_comm_ops_t *ops, const adag_comm_id_t *id,
                     unsigned nranks, unsigned rank, size_t cap)
{
    memset(r, 0, sizeof(*r));
    r->ops = ops;
    r->d = adag_device_backend(ops->device_kind);
    r->id = *id;
    r->nranks = nranks;
    r->rank = rank;
    r->cap = cap ? cap : 1;
    if (r->d->open(rank, &r->dev) != ADAG_OK || r->d->bind_thread(r->dev) != ADAG_OK ||
        r->d->stream_create(r->dev, &r->s) != ADAG_OK ||
        r->d->mem_alloc(r->dev, r->cap, &r->dsend) != ADAG_OK ||
        r->d->mem_alloc(r->dev, r->cap, &r->drecv) != ADAG_OK ||
        r->d->host_alloc(r->dev, r->cap, &r->hbuf) != ADAG_OK) {
        snprintf(r->err, sizeof(r->err), "rank %u: opening its device: %s", rank,
                 adag_last_error());
        return 1;
    }
    return 0;
}

static void rank_close(rank_t *r)
{
    if (r->comm)
        r->ops->destroy(r->comm);
    if (r->s)
        r->d->stream_destroy(r->dev, r->s);
    if (r->dsend.ptr)
        r->d->mem_free(r->dev, &r->dsend);
    if (r->drecv.ptr)
        r->d->mem_free(r->dev, &r->drecv);
    if (r->hbuf.ptr)
        r->d->host_free(r->dev, &r->hbuf);
    if (r->dev)
        r->d->close(r->dev);
    r->comm = NULL;
    r->dev = NULL;
}

static adag_status_t rank_join(rank_t *r)
{
    r->d->bind_thread(r->dev);
    r->init_st = r->ops->init(&r->id, r->nranks, r->rank, r->dev, adag_deadline_ms(20000),
                              &r->comm);
    if (r->init_st != ADAG_OK)
        snprintf(r->err, sizeof(r->err), "rank %u: init: %s", r->rank, adag_last_error());
    return r->init_st;
}

/* Enqueues call c on the rank's stream (no staging, no sync). */
static adag_status_t enqueue_call(rank_t *r, const call_t *c, void *send, void *recv)
{
    switch (c->kind) {
    case ALLREDUCE:
        return r->ops->allreduce(r->comm, send, recv, c->count, c->dtype, c->op, r->s);
    case ALLGATHER:
        return r->ops->allgather(r->comm, send, recv, c->count, c->dtype, r->s);
    case REDUCESCATTER:
        return r->ops->reducescatter(r->comm, send, recv, c->count, c->dtype, c->op, r->s);
    default:
        return r->ops->broadcast(r->comm, send, recv, c->count, c->dtype, c->root, r->s);
    }
}

/* Runs call c: fills the send buffer (host staging, copied to the device),
 * enqueues, copies the result back, syncs and checks it. */
static int run_call(rank_t *r, const call_t *c)
{
    size_t es = adag_dtype_size(c->dtype), n = r->nranks;
    size_t sbytes = send_count(c, r->nranks) * es, rbytes = recv_count(c, r->nranks) * es;
    unsigned char *h = r->hbuf.ptr;
    /* in place: the send elements sit where the call reads them in recv */
    unsigned char *dsend = c->in_place ? r->drecv.ptr : r->dsend.ptr;
    if (sbytes > r->cap || rbytes > r->cap) {
        snprintf(r->err, sizeof(r->err), "call of %zu/%zu bytes past the buffers", sbytes, rbytes);
        return 1;
    }
    adag_status_t st = ADAG_OK;
    if (!c->in_place) { /* recv starts as garbage */
        memset(h, 0xa5, rbytes);
        st = r->d->copy_async(r->s, r->drecv.ptr, h, rbytes);
        if (st == ADAG_OK)
            st = r->d->stream_sync(r->s, adag_deadline_ms(60000));
    }
    for (size_t i = 0; i < send_count(c, r->nranks); i++)
        element(c, r->rank, i, h + i * es);
    if (st == ADAG_OK)
        st = r->d->copy_async(r->s, dsend, h, sbytes);
    if (st == ADAG_OK)
        st = enqueue_call(r, c, dsend, r->drecv.ptr);
    if (st == ADAG_OK)
        st = r->d->copy_async(r->s, h, r->drecv.ptr, rbytes);
    if (st == ADAG_OK)
        st = r->d->stream_sync(r->s, adag_deadline_ms(60000));
    if (st != ADAG_OK) {
        snprintf(r->err, sizeof(r->err), "rank %u: %s(count %zu, %s) of %zu ranks: %s", r->rank,
                 kind_names[c->kind], c->count, adag_dtype_name(c->dtype), n, adag_last_error());
        return 1;
    }
    return check_recv(c, r->nranks, r->rank, h, r->ops->kind == ADAG_COMM_KIND_HOST, r->err,
                      sizeof(r->err));
}

/* Runs the rank's calls in order; on a failure aborts the communicator
 * (the other ranks give up too) and returns nonzero with r->err. */
static int run_calls(rank_t *r)
{
    for (size_t i = 0; i < r->ncalls; i++)
        if (run_call(r, &r->calls[i])) {
            r->ops->abort(r->comm);
            return 1;
        }
    return 0;
}

static void *rank_main(void *arg)
{
    rank_t *r = arg;
    if (rank_join(r) != ADAG_OK)
        return (void *)1;
    return (void *)(intptr_t)run_calls(r);
}

/* n ranks in threads on devices 0..n-1, each running calls[0..ncalls). */
static void run_in_threads(const adag_comm_ops_t *ops, unsigned n, const call_t *calls,
                           size_t ncalls, size_t cap)
{
    adag_comm_id_t id;
    void *owner;
    rank_t r[MAX_RANKS];
    pthread_t t[MAX_RANKS];
    void *res[MAX_RANKS];
    cr_assert_eq(ops->id_create(n, &id, &owner), ADAG_OK, "%s", adag_last_error());
    for (unsigned i = 0; i < n; i++) {
        cr_assert_eq(rank_open(&r[i], ops, &id, n, i, cap), 0, "%s", r[i].err);
        r[i].calls = calls;
        r[i].ncalls = ncalls;
    }
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, rank_main, &r[i]), 0);
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], &res[i]);
    ops->id_destroy(owner);
    for (unsigned i = 0; i < n; i++)
        cr_assert_eq((intptr_t)res[i], 0, "%s", r[i].err);
    for (unsigned i = 0; i < n; i++)
        rank_close(&r[i]);
    assert_counts_zero();
}

/* ---- the matrix ---- */

static const adag_dtype_t dtypes[] = {ADAG_DTYPE_U8,  ADAG_DTYPE_I8,   ADAG_DTYPE_I16,
                                      ADAG_DTYPE_I32, ADAG_DTYPE_I64,  ADAG_DTYPE_F16,
                                      ADAG_DTYPE_BF16, ADAG_DTYPE_F32, ADAG_DTYPE_F64,
                                      ADAG_DTYPE_BOOL};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))
/* 0, 1, odd, not divisible by 2..5, and past the flat allreduce */
static const size_t counts[] = {0, 1, 37, 1001, 5003};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

/* Whether the backend reduces dtype with op (NCCL: no i16, no bool). */
static int reducible(uint32_t kind, adag_dtype_t dtype, adag_reduce_op_t op)
{
    if (dtype == ADAG_DTYPE_BOOL && op == ADAG_REDUCE_AVG)
        return 0;
    return kind != ADAG_COMM_KIND_NCCL || (dtype != ADAG_DTYPE_I16 && dtype != ADAG_DTYPE_BOOL);
}

/* Every collective x op x dtype x count for n ranks (in place every other
 * time, roots in turn); *ncalls set. The caller frees. */
static call_t *matrix(uint32_t kind, unsigned n, size_t *ncalls)
{
    call_t *calls = calloc(NKINDS * 5 * NDTYPES * NCOUNTS, sizeof(*calls));
    size_t k = 0;
    cr_assert_not_null(calls);
    for (int c = 0; c < NKINDS; c++)
        for (int op = 0; op < 5; op++) {
            if ((c == ALLGATHER || c == BROADCAST) && op > 0)
                continue; /* no op */
            for (size_t d = 0; d < NDTYPES; d++) {
                if ((c == ALLREDUCE || c == REDUCESCATTER) &&
                    !reducible(kind, dtypes[d], (adag_reduce_op_t)op))
                    continue;
                for (size_t i = 0; i < NCOUNTS; i++, k++)
                    calls[k] = (call_t){c, dtypes[d], (adag_reduce_op_t)op, counts[i],
                                        (unsigned)(k % n), (int)(k % 2), (unsigned)k};
            }
        }
    *ncalls = k;
    return calls;
}

static void matrix_in_threads(uint32_t kind, unsigned n)
{
    const adag_comm_ops_t *ops = ops_or_skip(kind, n);
    size_t ncalls;
    call_t *calls = matrix(kind, n, &ncalls);
    run_in_threads(ops, n, calls, ncalls, 5003 * 8 * n);
    free(calls);
}

/* Host devices for 5 ranks (Criterion runs each test in a process of its
 * own: the setting is read anew). */
static void more_host_devices(void)
{
    cr_assert_eq(setenv("ADAG_HOST_DEVICES", "8", 1), 0);
}

COMM_TEST(matrix_2_ranks, 120)
{
    matrix_in_threads(*kind, 2);
}

COMM_TEST(matrix_3_ranks, 120)
{
    matrix_in_threads(*kind, 3);
}

COMM_TEST(matrix_4_ranks, 120)
{
    matrix_in_threads(*kind, 4);
}

COMM_TEST(matrix_5_ranks, 120)
{
    more_host_devices();
    matrix_in_threads(*kind, 5);
}
