/*
 * The "nccl" communicator backend (gpu/comm.h): ranks on CUDA devices
 * (gpu/cuda.c), through NCCL.
 *
 * NCCL is not linked: libnccl.so.2 is loaded with dlopen at first use
 * (ADAG_NCCL_PATH if set, and then only that; else libnccl.so.2 from the
 * loader's path, then the build's toolkit's lib/ and lib64/, where the CUDA
 * runtime is) and every function is called through a table resolved with
 * dlsym. nccl.h gives the types only: this file is compiled with
 * -DADAG_HAVE_NCCL when the Makefile finds it, and without it the backend
 * says "not built" and creates nothing.
 *
 * How each op maps to NCCL:
 *   probe      the library loads and the cuda device backend has a device;
 *   id_create  ncclGetUniqueId: the id is its 128 bytes (no owner to keep);
 *   init       ncclCommInitRankConfig with config.blocking = 0, so it
 *              returns at once; ncclCommGetAsyncError is polled until the
 *              communicator is ready, and at the deadline it is aborted
 *              (ncclCommAbort) and init fails with ADAG_ERR_TIMEOUT;
 *   send/recv  ncclSend / ncclRecv of ncclUint8 counts on the stream's
 *              cudaStream_t (the device ops' stream_native). A nonblocking
 *              communicator may answer ncclInProgress: the enqueue is then
 *              polled to its end (bounded by ADAG_COMM_TIMEOUT_MS), still
 *              without waiting for the work;
 *   collectives ncclAllReduce, ncclAllGather, ncclReduceScatter and
 *              ncclBroadcast on the stream, enqueued like send/recv. Reduced
 *              dtypes map to NCCL's (AVG is ncclAvg); i16 and bool, which
 *              NCCL does not reduce, are refused (ADAG_ERR_INVALID). allgather
 *              and broadcast move any dtype as count * size ncclUint8. In
 *              place (send == recv) is NCCL's in place for rank 0; other
 *              ranks' blocks are moved with a copy on the stream;
 *   abort      ncclCommAbort, once; it frees NCCL's communicator, so every
 *              NCCL call on it takes the rank's lock and checks `aborted`;
 *   status     ncclCommGetAsyncError, with ncclGetErrorString and
 *              ncclGetLastError in the message (ADAG_ERR_IO);
 *   destroy    ncclCommDestroy (nothing after an abort).
 */
#include "gpu/comm.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

extern const adag_comm_ops_t adag_comm_nccl_ops;

#ifndef ADAG_CUDA_HOME
#define ADAG_CUDA_HOME "/usr/local/cuda"
#endif

static _Atomic uint64_t live_comms, live_ids;

static void nccl_counts(adag_comm_counts_t *out)
{
    out->comms = atomic_load(&live_comms);
    out->ids = atomic_load(&live_ids);
}

#ifndef ADAG_HAVE_NCCL

/* Built without nccl.h: never usable, and why. */
static int nccl_probe_unbuilt(char *why, size_t len)
{
    if (why && len)
        snprintf(why, len, "not built: nccl.h not found at %s/include", ADAG_CUDA_HOME);
    return 0;
}

static adag_status_t nccl_id_create_unbuilt(unsigned nranks, adag_comm_id_t *id, void **owner)
{
    char why[128];
    (void)id;
    *owner = NULL;
    nccl_probe_unbuilt(why, sizeof(why));
    return adag__error(ADAG_ERR_NOT_FOUND, "nccl communicator of %u ranks: %s", nranks, why);
}

static adag_status_t nccl_init_unbuilt(const adag_comm_id_t *id, unsigned nranks, unsigned rank,
                                       adag_device_t *dev, int64_t deadline, adag_comm_t **out)
{
    char why[128];
    (void)id, (void)dev, (void)deadline;
    *out = NULL;
    nccl_probe_unbuilt(why, sizeof(why));
    return adag__error(ADAG_ERR_NOT_FOUND, "nccl communicator (rank %u of %u): %s", rank, nranks,
                      why);
}

static void nccl_id_destroy_unbuilt(void *owner)
{
    (void)owner;
}

/* Every other op needs a communicator, which never exists. */
const adag_comm_ops_t adag_comm_nccl_ops = {
    .name = "nccl",
    .kind = ADAG_COMM_KIND_NCCL,
    .device_kind = ADAG_DEV_CUDA,
    .probe = nccl_probe_unbuilt,
    .id_create = nccl_id_create_unbuilt,
    .id_destroy = nccl_id_destroy_unbuilt,
    .init = nccl_init_unbuilt,
    .counts = nccl_counts,
};

#else /* ADAG_HAVE_NCCL */

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

/* ---- the library, loaded once ---- */

/* Every NCCL function this backend calls; each field has the type of the
 * header's prototype, and is resolved as "nccl" #name. */
#define NCCL_FUNCTIONS(X)                                                                          \
    X(GetVersion) X(GetUniqueId) X(CommInitRankConfig) X(CommGetAsyncError) X(CommAbort)           \
    X(CommDestroy) X(Send) X(Recv) X(AllReduce) X(AllGather) X(ReduceScatter) X(Broadcast)          \
    X(GetErrorString) X(GetLastError)

#define NCCL_FIELD(name) __typeof__(&nccl##name) name;
typedef struct {
    NCCL_FUNCTIONS(NCCL_FIELD)
} nccl_fns_t;
#undef NCCL_FIELD

static struct {
    pthread_once_t once;
    void *lib;                  /* NULL if loading failed */
    char loaded[256];           /* what was loaded */
    char error[ADAG_ERROR_MAX]; /* why not */
    nccl_fns_t fn;
} lib = {.once = PTHREAD_ONCE_INIT};

/* The candidates when ADAG_NCCL_PATH is unset, in order. */
static const char *const nccl_names[] = {
    "libnccl.so.2",
    ADAG_CUDA_HOME "/lib/libnccl.so.2",
    ADAG_CUDA_HOME "/lib64/libnccl.so.2",
};
#define NNCCL_NAMES (sizeof(nccl_names) / sizeof(nccl_names[0]))

static void nccl_load(void)
{
    const char *forced = adag__process_settings()->nccl_path;
    const char *name = NULL;
    if (forced) {
        lib.lib = dlopen(forced, RTLD_NOW | RTLD_LOCAL);
        if (!lib.lib) {
            snprintf(lib.error, sizeof(lib.error), "cannot load NCCL %s (ADAG_NCCL_PATH): %s",
                     forced, dlerror());
            return;
        }
        name = forced;
    } else {
        char first[ADAG_ERROR_MAX / 2] = "";
        for (size_t i = 0; i < NNCCL_NAMES && !lib.lib; i++) {
            lib.lib = dlopen(nccl_names[i], RTLD_NOW | RTLD_LOCAL);
            if (lib.lib)
                name = nccl_names[i];
            else if (i == 0)
                snprintf(first, sizeof(first), "%s", dlerror());
        }
        if (!lib.lib) {
            snprintf(lib.error, sizeof(lib.error),
                     "cannot load NCCL (tried libnccl.so.2 and %s/lib, lib64; ADAG_NCCL_PATH "
                     "sets the path): %s",
                     ADAG_CUDA_HOME, first);
            return;
        }
    }
    snprintf(lib.loaded, sizeof(lib.loaded), "%s", name);
#define NCCL_RESOLVE(sym)                                                                          \
    lib.fn.sym = (__typeof__(lib.fn.sym))dlsym(lib.lib, "nccl" #sym);                              \
    if (!lib.fn.sym) {                                                                             \
        snprintf(lib.error, sizeof(lib.error), "NCCL %s has no nccl" #sym, name);                  \
        goto fail;                                                                                 \
    }
    NCCL_FUNCTIONS(NCCL_RESOLVE)
#undef NCCL_RESOLVE
    return;
fail:
    dlclose(lib.lib);
    lib.lib = NULL;
}

static bool nccl_loaded(void)
{
    pthread_once(&lib.once, nccl_load);
    return lib.lib != NULL;
}

/* ---- probe and ids ---- */

static int nccl_probe(char *why, size_t len)
{
    char scratch[8], cuda_why[ADAG_ERROR_MAX / 2] = "";
    if (!why || !len) {
        why = scratch;
        len = sizeof(scratch);
    }
    if (!nccl_loaded()) {
        snprintf(why, len, "%s", lib.error);
        return 0;
    }
    const adag_device_ops_t *cuda = adag__device_backend(ADAG_DEV_CUDA);
    unsigned n = cuda->probe(cuda_why, sizeof(cuda_why));
    if (n == 0) {
        snprintf(why, len, "no CUDA device (%s)", cuda_why);
        return 0;
    }
    int v = 0;
    lib.fn.GetVersion(&v);
    snprintf(why, len, "%s: NCCL %d.%d.%d, %u CUDA device%s", lib.loaded, v / 10000,
             v % 10000 / 100, v % 100, n, n == 1 ? "" : "s");
    return 1;
}

/* Owns nothing (an NCCL id needs nothing kept alive): a tag, counted. */
static char id_owner_tag;

static adag_status_t nccl_id_create(unsigned nranks, adag_comm_id_t *id, void **owner)
{
    char why[ADAG_ERROR_MAX / 2];
    ncclUniqueId uid;
    _Static_assert(sizeof(uid) <= ADAG_COMM_ID_BYTES, "an ncclUniqueId does not fit an id");
    *owner = NULL;
    if (nranks < 1 || nranks > ADAG_COMM_MAX_RANKS)
        return adag__error(ADAG_ERR_INVALID, "nccl communicator: %u ranks (1 to %d)", nranks,
                          ADAG_COMM_MAX_RANKS);
    if (!nccl_probe(why, sizeof(why)))
        return adag__error(ADAG_ERR_NOT_FOUND, "nccl communicator of %u ranks: not usable: %s",
                          nranks, why);
    ncclResult_t r = lib.fn.GetUniqueId(&uid);
    if (r != ncclSuccess)
        return adag__error(ADAG_ERR_IO, "nccl communicator of %u ranks: ncclGetUniqueId: %s: %s",
                          nranks, lib.fn.GetErrorString(r), lib.fn.GetLastError(NULL));
    memset(id, 0, sizeof(*id));
    memcpy(id->bytes, &uid, sizeof(uid));
    id->len = sizeof(uid);
    *owner = &id_owner_tag;
    atomic_fetch_add(&live_ids, 1);
    return ADAG_OK;
}

static void nccl_id_destroy(void *owner)
{
    if (owner == &id_owner_tag)
        atomic_fetch_sub(&live_ids, 1);
}

/* ---- a rank ---- */

typedef struct {
    adag_comm_t base;
    char who[48]; /* "nccl communicator (rank 1 of 4)" */
    /* Every NCCL call on `comm` is made under lock, after checking
     * `aborted`: ncclCommAbort frees it. aborted is set (seq_cst) before
     * abort takes the lock, so status answers without waiting for it. */
    pthread_mutex_t lock;
    _Atomic int aborted;
    ncclComm_t comm;
} nccl_comm_t;

static nccl_comm_t *nccl_comm(adag_comm_t *c)
{
    return (nccl_comm_t *)c;
}

/* Sleeps 100 us, never past the deadline (NCCL's own progress runs on its
 * threads: polling faster buys nothing). */
static void nap(int64_t deadline)
{
    int64_t ns = 100000, left = deadline - adag__now_ns();
    if (left <= 0)
        return;
    struct timespec ts = {0, (long)(left < ns ? left : ns)};
    nanosleep(&ts, NULL);
}

/* Polls comm's state until it is no longer ncclInProgress or the deadline
 * passes (then ncclInProgress). */
static ncclResult_t settle(ncclComm_t comm, int64_t deadline)
{
    ncclResult_t state = ncclInProgress;
    for (;;) {
        ncclResult_t r = lib.fn.CommGetAsyncError(comm, &state);
        if (r != ncclSuccess)
            return r;
        if (state != ncclInProgress || adag__now_ns() >= deadline)
            return state;
        nap(deadline);
    }
}

static adag_status_t nccl_fail(const char *who, ncclComm_t comm, ncclResult_t r, const char *what)
{
    const char *last = lib.fn.GetLastError(comm);
    return adag__error(ADAG_ERR_IO, "%s: %s: %s%s%s", who, what, lib.fn.GetErrorString(r),
                      last && *last ? ": " : "", last ? last : "");
}

static adag_status_t nccl_init(const adag_comm_id_t *id, unsigned nranks, unsigned rank,
                               adag_device_t *dev, int64_t deadline, adag_comm_t **out)
{
    char who[48], why[ADAG_ERROR_MAX / 2];
    ncclUniqueId uid;
    ncclComm_t comm = NULL;
    adag_status_t st;
    *out = NULL;
    snprintf(who, sizeof(who), "nccl communicator (rank %u of %u)", rank, nranks);
    if (!id || !dev || nranks < 1 || nranks > ADAG_COMM_MAX_RANKS || rank >= nranks)
        return adag__error(ADAG_ERR_INVALID, "%s: init needs an id, a device, 1 to %d ranks and "
                          "a rank below them", who, ADAG_COMM_MAX_RANKS);
    if (dev->ops->kind != ADAG_DEV_CUDA)
        return adag__error(ADAG_ERR_INVALID, "%s: its ranks are on cuda devices, not %s", who,
                          dev->ops->name);
    if (id->len != sizeof(uid))
        return adag__error(ADAG_ERR_PROTOCOL, "%s: malformed id (%u bytes; an NCCL id is %zu)",
                          who, id->len, sizeof(uid));
    if (!nccl_probe(why, sizeof(why)))
        return adag__error(ADAG_ERR_NOT_FOUND, "%s: not usable: %s", who, why);
    if ((st = dev->ops->bind_thread(dev)) != ADAG_OK)
        return st;
    memcpy(&uid, id->bytes, sizeof(uid));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = lib.fn.CommInitRankConfig(&comm, (int)nranks, uid, (int)rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        st = nccl_fail(who, comm, r, "ncclCommInitRankConfig");
        goto fail;
    }
    r = settle(comm, deadline);
    if (r == ncclInProgress) {
        st = adag__error(ADAG_ERR_TIMEOUT, "%s: init deadline passed before every rank joined "
                        "(ncclCommInitRankConfig still in progress)", who);
        goto fail;
    }
    if (r != ncclSuccess) {
        st = nccl_fail(who, comm, r, "ncclCommInitRankConfig");
        goto fail;
    }
    nccl_comm_t *c = calloc(1, sizeof(*c));
    if (!c) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "%s: out of memory", who);
        goto fail;
    }
    c->base = (adag_comm_t){&adag_comm_nccl_ops, nranks, rank, dev,
                            adag__settings_env_int("ADAG_COMM_TIMEOUT_MS")};
    memcpy(c->who, who, sizeof(c->who));
    pthread_mutex_init(&c->lock, NULL);
    c->comm = comm;
    atomic_fetch_add(&live_comms, 1);
    *out = &c->base;
    return ADAG_OK;
fail:
    if (comm)
        lib.fn.CommAbort(comm);
    return st;
}

/* One NCCL call to enqueue: which, its buffers, count and type, the op
 * (reductions), peer (send/recv) or root (broadcast). */
typedef enum { CALL_SEND, CALL_RECV, CALL_ALLREDUCE, CALL_ALLGATHER, CALL_REDUCESCATTER,
               CALL_BROADCAST } call_kind_t;

typedef struct {
    call_kind_t kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    ncclRedOp_t op;
    int peer; /* or root */
} nccl_call_t;

static ncclResult_t issue(nccl_comm_t *c, const nccl_call_t *k, cudaStream_t cs)
{
    switch (k->kind) {
    case CALL_SEND:
        return lib.fn.Send(k->send, k->count, k->type, k->peer, c->comm, cs);
    case CALL_RECV:
        return lib.fn.Recv(k->recv, k->count, k->type, k->peer, c->comm, cs);
    case CALL_ALLREDUCE:
        return lib.fn.AllReduce(k->send, k->recv, k->count, k->type, k->op, c->comm, cs);
    case CALL_ALLGATHER:
        return lib.fn.AllGather(k->send, k->recv, k->count, k->type, c->comm, cs);
    case CALL_REDUCESCATTER:
        return lib.fn.ReduceScatter(k->send, k->recv, k->count, k->type, k->op, c->comm, cs);
    case CALL_BROADCAST:
        return lib.fn.Broadcast(k->send, k->recv, k->count, k->type, k->peer, c->comm, cs);
    }
    return ncclInvalidArgument;
}

/* Enqueues one call on s under the rank's lock; `what` names it in errors
 * ("ncclSend(100 bytes, rank 1)"). */
static adag_status_t nccl_enqueue(adag_comm_t *base, const nccl_call_t *k, adag_dev_stream_t *s,
                                  const char *what)
{
    nccl_comm_t *c = nccl_comm(base);
    adag_status_t st = base->dev->ops->bind_thread(base->dev);
    if (st != ADAG_OK)
        return st;
    cudaStream_t cs = (cudaStream_t)base->dev->ops->stream_native(s);
    int64_t timeout_ms = base->timeout_ms;
    int64_t deadline = adag__deadline_ms(timeout_ms > 0 ? timeout_ms : -1);
    pthread_mutex_lock(&c->lock);
    if (atomic_load_explicit(&c->aborted, memory_order_seq_cst)) {
        pthread_mutex_unlock(&c->lock);
        return adag__error(ADAG_ERR_CLOSED, "%s: %s: the communicator was aborted", c->who, what);
    }
    ncclResult_t r = issue(c, k, cs);
    if (r == ncclInProgress)
        r = settle(c->comm, deadline);
    if (r == ncclInProgress)
        st = adag__error(ADAG_ERR_TIMEOUT, "%s: %s: still being enqueued after %lld ms", c->who,
                        what, (long long)timeout_ms);
    else if (r != ncclSuccess)
        st = nccl_fail(c->who, c->comm, r, what);
    pthread_mutex_unlock(&c->lock);
    return st;
}

static adag_status_t enqueue_op(adag_comm_t *base, void *buf, size_t size, unsigned peer,
                                adag_dev_stream_t *s, int is_send)
{
    nccl_comm_t *c = nccl_comm(base);
    const char *call = is_send ? "ncclSend" : "ncclRecv";
    char what[96];
    if (peer >= base->nranks || peer == base->rank || !s || (!buf && size))
        return adag__error(ADAG_ERR_INVALID, "%s: %s to rank %u: the peer must be another rank "
                          "below %u, with a stream and a buffer", c->who, call, peer,
                          base->nranks);
    snprintf(what, sizeof(what), "%s(%zu bytes, rank %u)", call, size, peer);
    nccl_call_t k = {is_send ? CALL_SEND : CALL_RECV, buf, buf, size, ncclUint8, ncclSum,
                     (int)peer};
    return nccl_enqueue(base, &k, s, what);
}

static adag_status_t nccl_send(adag_comm_t *c, const void *buf, size_t size, unsigned peer,
                               adag_dev_stream_t *s)
{
    return enqueue_op(c, (void *)buf, size, peer, s, 1);
}

static adag_status_t nccl_recv(adag_comm_t *c, void *buf, size_t size, unsigned peer,
                               adag_dev_stream_t *s)
{
    return enqueue_op(c, buf, size, peer, s, 0);
}

/* ---- collectives ---- */

/* NCCL's type for reducing dtype: 0 and *type set, or nonzero for the
 * dtypes NCCL does not reduce (i16, bool) or that are not tensor dtypes. */
static int reduce_type(adag_dtype_t dtype, ncclDataType_t *type)
{
    switch (dtype) {
    case ADAG_DTYPE_U8: *type = ncclUint8; return 0;
    case ADAG_DTYPE_I8: *type = ncclInt8; return 0;
    case ADAG_DTYPE_I32: *type = ncclInt32; return 0;
    case ADAG_DTYPE_I64: *type = ncclInt64; return 0;
    case ADAG_DTYPE_F16: *type = ncclFloat16; return 0;
    case ADAG_DTYPE_BF16: *type = ncclBfloat16; return 0;
    case ADAG_DTYPE_F32: *type = ncclFloat32; return 0;
    case ADAG_DTYPE_F64: *type = ncclFloat64; return 0;
    default: return 1;
    }
}

static int reduce_op(adag_reduce_op_t op, ncclRedOp_t *out)
{
    switch (op) {
    case ADAG_REDUCE_SUM: *out = ncclSum; return 0;
    case ADAG_REDUCE_PROD: *out = ncclProd; return 0;
    case ADAG_REDUCE_MIN: *out = ncclMin; return 0;
    case ADAG_REDUCE_MAX: *out = ncclMax; return 0;
    case ADAG_REDUCE_AVG: *out = ncclAvg; return 0;
    }
    return 1;
}

/* Checks a collective's dtype (and op, for a reduction), stream, buffers
 * and size, and fills k's type, op and count (bytes as ncclUint8 for the
 * collectives that only move data). */
static adag_status_t check_coll(adag_comm_t *base, const char *name, const void *send,
                                void *recv, size_t count, adag_dtype_t dtype, int reduces,
                                adag_reduce_op_t op, int reads_send, adag_dev_stream_t *s,
                                nccl_call_t *k)
{
    nccl_comm_t *c = nccl_comm(base);
    size_t es = dtype == ADAG_DTYPE_BYTES ? 0 : adag_dtype_size(dtype);
    if (es == 0)
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu elements: dtype %d (%s) is not a "
                          "tensor dtype", c->who, name, count, (int)dtype, adag_dtype_name(dtype));
    if (reduces && reduce_type(dtype, &k->type))
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu %s elements: NCCL does not reduce %s",
                          c->who, name, count, adag_dtype_name(dtype), adag_dtype_name(dtype));
    if (reduces && reduce_op(op, &k->op))
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu %s elements: op %d is not a "
                          "reduction", c->who, name, count, adag_dtype_name(dtype), (int)op);
    if (!s || (count && (!recv || (reads_send && !send))))
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu elements needs a stream and buffers",
                          c->who, name, count);
    if (count > SIZE_MAX / es / base->nranks)
        return adag__error(ADAG_ERR_INVALID, "%s: %s of %zu %s elements for %u ranks overflows "
                          "a size", c->who, name, count, adag_dtype_name(dtype), base->nranks);
    k->send = send;
    k->recv = recv;
    k->count = count;
    if (!reduces) {
        k->type = ncclUint8;
        k->count = count * es;
    }
    return ADAG_OK;
}

static adag_status_t nccl_allreduce(adag_comm_t *base, const void *send, void *recv,
                                    size_t count, adag_dtype_t dtype, adag_reduce_op_t op,
                                    adag_dev_stream_t *s)
{
    nccl_call_t k = {.kind = CALL_ALLREDUCE};
    char what[96];
    adag_status_t st = check_coll(base, "ncclAllReduce", send, recv, count, dtype, 1, op, 1, s, &k);
    if (st != ADAG_OK)
        return st;
    snprintf(what, sizeof(what), "ncclAllReduce(%zu %s)", count, adag_dtype_name(dtype));
    return nccl_enqueue(base, &k, s, what);
}

/* send == recv (this interface's in place) is NCCL's in place for rank 0
 * only; another rank's block is first copied where NCCL reads it in
 * place (recv + rank * bytes), on the stream. */
static adag_status_t nccl_allgather(adag_comm_t *base, const void *send, void *recv,
                                    size_t count, adag_dtype_t dtype, adag_dev_stream_t *s)
{
    nccl_call_t k = {.kind = CALL_ALLGATHER};
    char what[96];
    adag_status_t st = check_coll(base, "ncclAllGather", send, recv, count, dtype, 0,
                                  ADAG_REDUCE_SUM, 1, s, &k);
    if (st != ADAG_OK)
        return st;
    snprintf(what, sizeof(what), "ncclAllGather(%zu %s)", count, adag_dtype_name(dtype));
    if (send == recv && base->rank > 0 && k.count) {
        unsigned char *mine = (unsigned char *)recv + (size_t)base->rank * k.count;
        if ((st = base->dev->ops->copy_async(s, mine, send, k.count)) != ADAG_OK)
            return st;
        k.send = mine;
    }
    return nccl_enqueue(base, &k, s, what);
}

/* send == recv: NCCL reduces in place into send + rank * bytes, then that
 * block is copied to the start (this interface's in place), on the stream. */
static adag_status_t nccl_reducescatter(adag_comm_t *base, const void *send, void *recv,
                                        size_t count, adag_dtype_t dtype, adag_reduce_op_t op,
                                        adag_dev_stream_t *s)
{
    nccl_call_t k = {.kind = CALL_REDUCESCATTER};
    char what[96];
    adag_status_t st = check_coll(base, "ncclReduceScatter", send, recv, count, dtype, 1, op,
                                  1, s, &k);
    if (st != ADAG_OK)
        return st;
    snprintf(what, sizeof(what), "ncclReduceScatter(%zu %s)", count, adag_dtype_name(dtype));
    size_t bytes = count * adag_dtype_size(dtype);
    int moved = send == recv && base->rank > 0 && count;
    if (moved)
        k.recv = (unsigned char *)recv + (size_t)base->rank * bytes;
    if ((st = nccl_enqueue(base, &k, s, what)) != ADAG_OK || !moved)
        return st;
    return base->dev->ops->copy_async(s, recv, k.recv, bytes);
}

static adag_status_t nccl_broadcast(adag_comm_t *base, const void *send, void *recv,
                                    size_t count, adag_dtype_t dtype, unsigned root,
                                    adag_dev_stream_t *s)
{
    nccl_comm_t *c = nccl_comm(base);
    nccl_call_t k = {.kind = CALL_BROADCAST, .peer = (int)root};
    char what[96];
    if (root >= base->nranks)
        return adag__error(ADAG_ERR_INVALID, "%s: broadcast from root %u: there are %u ranks",
                          c->who, root, base->nranks);
    adag_status_t st = check_coll(base, "ncclBroadcast", send, recv, count, dtype, 0,
                                  ADAG_REDUCE_SUM, root == base->rank, s, &k);
    if (st != ADAG_OK)
        return st;
    snprintf(what, sizeof(what), "ncclBroadcast(%zu %s, root %u)", count,
             adag_dtype_name(dtype), root);
    return nccl_enqueue(base, &k, s, what);
}

static void nccl_abort(adag_comm_t *base)
{
    if (!base)
        return;
    nccl_comm_t *c = nccl_comm(base);
    if (atomic_exchange_explicit(&c->aborted, 1, memory_order_seq_cst))
        return;
    pthread_mutex_lock(&c->lock);
    ncclResult_t r = lib.fn.CommAbort(c->comm);
    if (r != ncclSuccess)
        ADAG_LOG_WARN("%s: ncclCommAbort: %s", c->who, lib.fn.GetErrorString(r));
    c->comm = NULL;
    pthread_mutex_unlock(&c->lock);
}

static adag_status_t nccl_status(adag_comm_t *base)
{
    nccl_comm_t *c = nccl_comm(base);
    ncclResult_t state = ncclSuccess;
    if (atomic_load_explicit(&c->aborted, memory_order_seq_cst))
        return adag__error(ADAG_ERR_CLOSED, "%s: aborted", c->who);
    pthread_mutex_lock(&c->lock);
    adag_status_t st = ADAG_OK;
    if (!c->comm) {
        st = adag__error(ADAG_ERR_CLOSED, "%s: aborted", c->who);
    } else {
        ncclResult_t r = lib.fn.CommGetAsyncError(c->comm, &state);
        if (r != ncclSuccess)
            st = nccl_fail(c->who, c->comm, r, "ncclCommGetAsyncError");
        else if (state != ncclSuccess && state != ncclInProgress)
            st = nccl_fail(c->who, c->comm, state, "asynchronous error");
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

static void nccl_destroy(adag_comm_t *base)
{
    if (!base)
        return;
    nccl_comm_t *c = nccl_comm(base);
    if (c->comm) {
        ncclResult_t r = lib.fn.CommDestroy(c->comm);
        if (r != ncclSuccess)
            ADAG_LOG_WARN("%s: ncclCommDestroy: %s", c->who, lib.fn.GetErrorString(r));
    }
    pthread_mutex_destroy(&c->lock);
    free(c);
    atomic_fetch_sub(&live_comms, 1);
}

const adag_comm_ops_t adag_comm_nccl_ops = {
    .name = "nccl",
    .kind = ADAG_COMM_KIND_NCCL,
    .device_kind = ADAG_DEV_CUDA,
    .probe = nccl_probe,
    .id_create = nccl_id_create,
    .id_destroy = nccl_id_destroy,
    .init = nccl_init,
    .send = nccl_send,
    .recv = nccl_recv,
    .allreduce = nccl_allreduce,
    .allgather = nccl_allgather,
    .reducescatter = nccl_reducescatter,
    .broadcast = nccl_broadcast,
    .abort = nccl_abort,
    .status = nccl_status,
    .destroy = nccl_destroy,
    .counts = nccl_counts,
};

#endif /* ADAG_HAVE_NCCL */
