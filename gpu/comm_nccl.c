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
    return adag_error(ADAG_ERR_NOT_FOUND, "nccl communicator of %u ranks: %s", nranks, why);
}

static adag_status_t nccl_init_unbuilt(const adag_comm_id_t *id, unsigned nranks, unsigned rank,
                                       adag_device_t *dev, int64_t deadline, adag_comm_t **out)
{
    char why[128];
    (void)id, (void)dev, (void)deadline;
    *out = NULL;
    nccl_probe_unbuilt(why, sizeof(why));
    return adag_error(ADAG_ERR_NOT_FOUND, "nccl communicator (rank %u of %u): %s", rank, nranks,
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
    .device_kind = ADAG_DEVICE_KIND_CUDA,
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
    X(CommDestroy) X(Send) X(Recv) X(GetErrorString) X(GetLastError)

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
    const char *forced = adag_settings()->nccl_path;
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
    const adag_device_ops_t *cuda = adag_device_backend(ADAG_DEVICE_KIND_CUDA);
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
    if (nranks < 2 || nranks > ADAG_COMM_MAX_RANKS)
        return adag_error(ADAG_ERR_INVALID, "nccl communicator: %u ranks (2 to %d)", nranks,
                          ADAG_COMM_MAX_RANKS);
    if (!nccl_probe(why, sizeof(why)))
        return adag_error(ADAG_ERR_NOT_FOUND, "nccl communicator of %u ranks: not usable: %s",
                          nranks, why);
    ncclResult_t r = lib.fn.GetUniqueId(&uid);
    if (r != ncclSuccess)
        return adag_error(ADAG_ERR_IO, "nccl communicator of %u ranks: ncclGetUniqueId: %s: %s",
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
    int64_t ns = 100000, left = deadline - adag_now_ns();
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
        if (state != ncclInProgress || adag_now_ns() >= deadline)
            return state;
        nap(deadline);
    }
}

static adag_status_t nccl_fail(const char *who, ncclComm_t comm, ncclResult_t r, const char *what)
{
    const char *last = lib.fn.GetLastError(comm);
    return adag_error(ADAG_ERR_IO, "%s: %s: %s%s%s", who, what, lib.fn.GetErrorString(r),
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
    if (!id || !dev || nranks < 2 || nranks > ADAG_COMM_MAX_RANKS || rank >= nranks)
        return adag_error(ADAG_ERR_INVALID, "%s: init needs an id, a device, 2 to %d ranks and "
                          "a rank below them", who, ADAG_COMM_MAX_RANKS);
    if (dev->ops->kind != ADAG_DEVICE_KIND_CUDA)
        return adag_error(ADAG_ERR_INVALID, "%s: its ranks are on cuda devices, not %s", who,
                          dev->ops->name);
    if (id->len != sizeof(uid))
        return adag_error(ADAG_ERR_PROTOCOL, "%s: malformed id (%u bytes; an NCCL id is %zu)",
                          who, id->len, sizeof(uid));
    if (!nccl_probe(why, sizeof(why)))
        return adag_error(ADAG_ERR_NOT_FOUND, "%s: not usable: %s", who, why);
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
        st = adag_error(ADAG_ERR_TIMEOUT, "%s: init deadline passed before every rank joined "
                        "(ncclCommInitRankConfig still in progress)", who);
        goto fail;
    }
    if (r != ncclSuccess) {
        st = nccl_fail(who, comm, r, "ncclCommInitRankConfig");
        goto fail;
    }
    nccl_comm_t *c = calloc(1, sizeof(*c));
    if (!c) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "%s: out of memory", who);
        goto fail;
    }
    c->base = (adag_comm_t){&adag_comm_nccl_ops, nranks, rank, dev};
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

static adag_status_t enqueue_op(adag_comm_t *base, void *buf, size_t size, unsigned peer,
                                adag_dev_stream_t *s, int is_send)
{
    nccl_comm_t *c = nccl_comm(base);
    const char *call = is_send ? "ncclSend" : "ncclRecv";
    char what[96];
    if (peer >= base->nranks || peer == base->rank || !s || (!buf && size))
        return adag_error(ADAG_ERR_INVALID, "%s: %s to rank %u: the peer must be another rank "
                          "below %u, with a stream and a buffer", c->who, call, peer,
                          base->nranks);
    adag_status_t st = base->dev->ops->bind_thread(base->dev);
    if (st != ADAG_OK)
        return st;
    cudaStream_t cs = (cudaStream_t)base->dev->ops->stream_native(s);
    int64_t timeout_ms = adag_settings()->comm_timeout_ms;
    int64_t deadline = adag_deadline_ms(timeout_ms > 0 ? timeout_ms : -1);
    pthread_mutex_lock(&c->lock);
    if (atomic_load_explicit(&c->aborted, memory_order_seq_cst)) {
        pthread_mutex_unlock(&c->lock);
        return adag_error(ADAG_ERR_CLOSED, "%s: %s: the communicator was aborted", c->who, call);
    }
    ncclResult_t r = is_send ? lib.fn.Send(buf, size, ncclUint8, (int)peer, c->comm, cs)
                             : lib.fn.Recv(buf, size, ncclUint8, (int)peer, c->comm, cs);
    if (r == ncclInProgress)
        r = settle(c->comm, deadline);
    snprintf(what, sizeof(what), "%s(%zu bytes, rank %u)", call, size, peer);
    if (r == ncclInProgress)
        st = adag_error(ADAG_ERR_TIMEOUT, "%s: %s: still being enqueued after %lld ms", c->who,
                        what, (long long)timeout_ms);
    else if (r != ncclSuccess)
        st = nccl_fail(c->who, c->comm, r, what);
    pthread_mutex_unlock(&c->lock);
    return st;
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
        return adag_error(ADAG_ERR_CLOSED, "%s: aborted", c->who);
    pthread_mutex_lock(&c->lock);
    adag_status_t st = ADAG_OK;
    if (!c->comm) {
        st = adag_error(ADAG_ERR_CLOSED, "%s: aborted", c->who);
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
    .device_kind = ADAG_DEVICE_KIND_CUDA,
    .probe = nccl_probe,
    .id_create = nccl_id_create,
    .id_destroy = nccl_id_destroy,
    .init = nccl_init,
    .send = nccl_send,
    .recv = nccl_recv,
    .abort = nccl_abort,
    .status = nccl_status,
    .destroy = nccl_destroy,
    .counts = nccl_counts,
};

#endif /* ADAG_HAVE_NCCL */
