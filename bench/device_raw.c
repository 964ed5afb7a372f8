/*
 * The raw mechanism under the device rows: the device ops table
 * (gpu/device.h) driven directly, with no runtime, in processes of
 * adag-bench started for it (`adag-bench --raw-peer ROLE`, the control
 * memfd on fd RAW_FD). They are spawned, not forked, so a CUDA context is
 * always fresh (CUDA refuses an imported handle in the exporting process,
 * and a context inherited through fork).
 *
 * The hop (baseline_device_hop), one round:
 *   driver  memcpy of the input into shared host memory (execute's copy),
 *           sets go_a
 *   A       comm: copy in; compute: waits for it and for B's `consumed`,
 *           copies in -> out (the work); records `ready`; sets go_b
 *   B       same device: compute waits for A's `ready` and reads A's memory
 *           (imported) while copying it to its own; peer: comm waits for
 *           `ready` and copies A's memory into its own first. Records
 *           `consumed`, then comm waits for compute and copies out into
 *           shared host memory, and a host function on comm sets `done`
 *   driver  waits for `done`, checks the stamps
 * which is what the device channels do (docs/design.md, "Device
 * channels"), less the runtime: no rings, no schedules, no slot headers.
 * Two mechanisms order B's stream after A's and A's next write after B's
 * read (dev_mech_t): IPC events (`ready`, `consumed`, exported and
 * imported), or value ops (stream_write_value64 / stream_wait_value64 on
 * two words in a page of the shared memfd that each process registered:
 * A writes `ready` = round, B waits for it and writes `consumed` = round,
 * which A's next round waits for). With `threads`, A and B are two
 * threads of one spawned process, each with its device object and
 * streams, as thread actors are: B uses A's memory and `ready` event
 * itself (nothing exported), or the same words.
 *
 * The copy (baseline_device_copy): copy_async + stream_sync of the same
 * bytes, one at a time, in a process of its own; for a peer copy, from the
 * memory of another process (device 0) imported on device 1.
 *
 * Memory ordering: the shared words are bench_cell_t (seq_cst, bench.h);
 * `setup` bits and `abort` are seq_cst read-modify-writes, and each handle
 * is written before the setup bit that publishes it (and read after).
 */
#include "bench.h"

#include "common/clock.h"
#include "gpu/device.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define RAW_MAGIC 0x72617764u /* "rawd" */
#define RAW_FD 100            /* where a peer finds the control memfd */
#define RAW_MAX_LAT 20000
#define RAW_SETUP_MS 30000    /* setup and teardown waits (not timed) */

typedef enum { ROLE_HOP_A, ROLE_HOP_B, ROLE_COPY, ROLE_OWNER, ROLE_HOP_THREADS, NROLES } raw_role_t;
static const char *const role_names[NROLES] = {"hop-a", "hop-b", "copy", "owner", "hop-threads"};

enum {
    SETUP_A = 1u << 0,     /* A exported its out memory and `ready` */
    SETUP_B = 1u << 1,     /* B exported `consumed` */
    READY_A = 1u << 2,     /* A imported `consumed`: rounds may start */
    READY_B = 1u << 3,
    DONE_A = 1u << 4,      /* its streams are idle and its imports closed */
    DONE_B = 1u << 5,
    OWNER_READY = 1u << 6, /* the owner's memory is filled and exported */
    COPY_DONE = 1u << 7,   /* the copier is done with the owner's memory */
};

typedef struct {
    uint32_t magic, kind, dev_a, dev_b;
    dev_path_t path;
    wait_policy_t policy;
    uint64_t bytes, host_off, host_stride, pattern;
    uint64_t words_off; /* the page of the two words (value ops) */
    dev_mech_t mech;
    uint32_t threads; /* A and B: threads of one process */
    long rounds, warmup;
    int32_t parent;
    _Atomic uint32_t abort, setup;
    _Atomic uint32_t unsupported; /* the failure is "value ops not supported here" */
    char error[256];
    adag_dev_handle_t a_out, a_ready, b_consumed, owner_mem;
    bench_cell_t go_a, go_b, done;
    double lat[RAW_MAX_LAT];
} raw_ctl_t;

static char *host_in(raw_ctl_t *c)
{
    return (char *)c + c->host_off;
}

static char *host_out(raw_ctl_t *c)
{
    return (char *)c + c->host_off + c->host_stride;
}

/* Word 0 (`ready`, A -> B) and 1 (`consumed`, B -> A): 64-byte cells. */
static _Atomic uint64_t *word_at(raw_ctl_t *c, unsigned i)
{
    return (_Atomic uint64_t *)((char *)c + c->words_off + i * ADAG_DEV_WORD_BYTES);
}

/* The first failure wins the message; every waiter sees abort. */
static int ADAG_PRINTF(2, 3) raw_fail(raw_ctl_t *c, const char *fmt, ...)
{
    uint32_t was = 0;
    if (atomic_compare_exchange_strong(&c->abort, &was, 1)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->error, sizeof c->error, fmt, ap);
        va_end(ap);
    }
    /* wake whoever sleeps on a word (bench_cell_wait re-checks abort) */
    bench_cell_t *cells[3] = {&c->go_a, &c->go_b, &c->done};
    for (int i = 0; i < 3; i++)
        syscall(SYS_futex, (uint32_t *)&cells[i]->word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    return -1;
}

static void setup_set(raw_ctl_t *c, uint32_t bits)
{
    atomic_fetch_or(&c->setup, bits);
}

static int setup_wait(raw_ctl_t *c, uint32_t bits, const char *what)
{
    int64_t deadline = adag__deadline_ms(RAW_SETUP_MS);
    while ((atomic_load(&c->setup) & bits) != bits) {
        if (atomic_load(&c->abort))
            return -1;
        if (adag__now_ns() > deadline)
            return raw_fail(c, "raw device baseline: no %s within %d ms", what, RAW_SETUP_MS);
        usleep(200);
    }
    return 0;
}

/* ---- the peers ---- */

/* What a peer holds, freed in reverse by peer_close. */
typedef struct {
    const adag_device_ops_t *ops;
    adag_device_t *dev;
    adag_dev_stream_t *comm, *compute;
    adag_dev_mem_t in, out, imported;
    adag_dev_mem_t pinned; /* the shared host memory it copies with, page-locked */
    adag_dev_event_t *ev_a, *ev_b, *ev_imported;
    adag_dev_mem_t words_reg;          /* value ops: the words' page, registered */
    adag_dev_word_t w_ready, w_consumed;
    int borrowed; /* threads: `imported` and `ev_imported` are the other thread's own */
} peer_t;

/* threads: what A hands B and B hands A in the process (each pointer
 * written before the seq_cst setup bit that publishes it, read after) */
static struct {
    adag_dev_mem_t a_out;
    adag_dev_event_t *a_ready, *b_consumed;
} local;

#define OPS_TRY(c, call, what)                                                              \
    do {                                                                                    \
        adag_status_t s_ = (call);                                                          \
        if (s_ != ADAG_OK) {                                                                \
            raw_fail((c), "raw device baseline: %s: %s", (what), adag_last_error());        \
            goto fail;                                                                      \
        }                                                                                   \
    } while (0)

static int peer_open(raw_ctl_t *c, peer_t *p, unsigned index)
{
    memset(p, 0, sizeof(*p));
    if (!(p->ops = adag__device_backend(c->kind)))
        return raw_fail(c, "raw device baseline: no device backend of kind %u", c->kind);
    OPS_TRY(c, p->ops->open(index, &p->dev), "opening the device");
    OPS_TRY(c, p->ops->bind_thread(p->dev), "binding the thread");
    OPS_TRY(c, p->ops->stream_create(p->dev, &p->comm), "a stream");
    OPS_TRY(c, p->ops->stream_create(p->dev, &p->compute), "a stream");
    return 0;
fail:
    return -1;
}

/* Idles the streams and closes the imports; `done` then says so to the
 * other side, and the exports are freed once it says the same. */
static void peer_close(raw_ctl_t *c, peer_t *p, uint32_t done, uint32_t other_done)
{
    const adag_device_ops_t *ops = p->ops;
    int64_t deadline = adag__deadline_ms(RAW_SETUP_MS);
    if (!p->dev)
        return;
    if (p->comm)
        ops->stream_sync(p->comm, deadline);
    if (p->compute)
        ops->stream_sync(p->compute, deadline);
    if (p->imported.ptr && !p->borrowed)
        ops->mem_unimport(p->dev, &p->imported);
    if (p->ev_imported && !p->borrowed)
        ops->event_destroy(p->dev, p->ev_imported);
    setup_set(c, done);
    if (other_done)
        setup_wait(c, other_done, "teardown of the other side");
    if (p->ev_a)
        ops->event_destroy(p->dev, p->ev_a);
    if (p->ev_b)
        ops->event_destroy(p->dev, p->ev_b);
    if (p->pinned.ptr)
        ops->host_unregister(p->dev, &p->pinned);
    if (p->words_reg.ptr)
        ops->host_unregister(p->dev, &p->words_reg);
    if (p->in.ptr)
        ops->mem_free(p->dev, &p->in);
    if (p->out.ptr)
        ops->mem_free(p->dev, &p->out);
    if (p->comm)
        ops->stream_destroy(p->dev, p->comm);
    if (p->compute)
        ops->stream_destroy(p->dev, p->compute);
    ops->close(p->dev);
}

/* Page-locks the shared host memory at host (c->bytes), as the device
 * channels do with their rings: copies with it then never hold the host. */
static adag_status_t pin_host(raw_ctl_t *c, peer_t *p, void *host)
{
    return p->ops->host_register(p->dev, host, c->bytes, &p->pinned);
}

static adag_status_t import_mem(peer_t *p, const adag_dev_handle_t *h)
{
    adag_dev_handle_t copy = *h; /* the import takes its fds (there are none) */
    return p->ops->mem_import(p->dev, &copy, &p->imported);
}

static adag_status_t import_event(peer_t *p, const adag_dev_handle_t *h)
{
    adag_dev_handle_t copy = *h;
    return p->ops->event_import(p->dev, &copy, &p->ev_imported);
}

typedef struct {
    raw_ctl_t *ctl;
    uint32_t round;
} done_args_t;

/* On B's comm stream, after the copy out (a host function: no device calls). */
static void signal_done(void *arg)
{
    const done_args_t *a = arg;
    bench_cell_set(&a->ctl->done, a->round);
}

/* Value ops: the words, registered by this process (A's thread registers
 * for both threads of one process), each mapped for the device. */
static int words_open(raw_ctl_t *c, peer_t *p, int do_register)
{
    char why[160] = "no value ops in this backend";
    if (!p->ops->values_supported || !p->ops->values_supported(p->dev, why, sizeof why)) {
        atomic_store(&c->unsupported, 1);
        return raw_fail(c, "value ops not supported: %s", why);
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (do_register)
        OPS_TRY(c, p->ops->host_register(p->dev, word_at(c, 0), page, &p->words_reg),
                "registering the words");
    OPS_TRY(c, p->ops->word_map(p->dev, word_at(c, 0), &p->w_ready), "mapping a word");
    OPS_TRY(c, p->ops->word_map(p->dev, word_at(c, 1), &p->w_consumed), "mapping a word");
    return 0;
fail:
    return -1;
}

/* A's side of setup: its out memory and `ready` to B (exported, or handed
 * over in this process), then B's `consumed` (imported or borrowed). */
static int setup_a(raw_ctl_t *c, peer_t *p)
{
    const adag_device_ops_t *ops = p->ops;
    int events = c->mech != DEV_MECH_MEMOPS;
    if (c->threads) {
        local.a_out = p->out;
        local.a_ready = p->ev_b;
    } else {
        OPS_TRY(c, ops->mem_export(p->dev, &p->out, &c->a_out), "exporting memory");
        if (events)
            OPS_TRY(c, ops->event_export(p->dev, p->ev_b, &c->a_ready), "exporting an event");
    }
    if (!events && words_open(c, p, 1))
        goto fail;
    setup_set(c, SETUP_A);
    if (setup_wait(c, SETUP_B, "`consumed` from B"))
        goto fail;
    if (events && c->threads) {
        p->ev_imported = local.b_consumed;
        p->borrowed = 1;
    } else if (events) {
        OPS_TRY(c, import_event(p, &c->b_consumed), "importing B's event");
    }
    setup_set(c, READY_A);
    return 0;
fail:
    return -1;
}

/* B's side: A's memory and `ready`, then its `consumed` to A. */
static int setup_b(raw_ctl_t *c, peer_t *p)
{
    const adag_device_ops_t *ops = p->ops;
    int events = c->mech != DEV_MECH_MEMOPS;
    if (setup_wait(c, SETUP_A, "memory and `ready` from A"))
        goto fail;
    if (c->threads) {
        p->imported = local.a_out;
        p->ev_imported = local.a_ready;
        p->borrowed = 1;
    } else {
        OPS_TRY(c, import_mem(p, &c->a_out), "importing A's memory");
        if (events)
            OPS_TRY(c, import_event(p, &c->a_ready), "importing A's event");
    }
    if (!events && words_open(c, p, !c->threads))
        goto fail;
    if (c->threads)
        local.b_consumed = p->ev_a;
    else if (events)
        OPS_TRY(c, ops->event_export(p->dev, p->ev_a, &c->b_consumed), "exporting an event");
    setup_set(c, SETUP_B | READY_B);
    return 0;
fail:
    return -1;
}

static int role_hop_a(raw_ctl_t *c)
{
    peer_t p;
    const adag_device_ops_t *ops;
    int rc = -1, memops = c->mech == DEV_MECH_MEMOPS;
    if (peer_open(c, &p, c->dev_a))
        goto fail;
    ops = p.ops;
    OPS_TRY(c, ops->mem_alloc(p.dev, c->bytes, &p.in), "device memory");
    OPS_TRY(c, ops->mem_alloc(p.dev, c->bytes, &p.out), "device memory");
    OPS_TRY(c, ops->event_create(p.dev, &p.ev_a), "an event"); /* copied in */
    OPS_TRY(c, ops->event_create(p.dev, &p.ev_b), "an event"); /* ready */
    OPS_TRY(c, pin_host(c, &p, host_in(c)), "page-locking the input");
    if (setup_a(c, &p))
        goto fail;
    for (long r = 1; r <= c->rounds; r++) {
        if (bench_cell_wait(&c->go_a, (uint32_t)r, c->policy, &c->abort))
            goto fail;
        OPS_TRY(c, ops->copy_async(p.comm, p.in.ptr, host_in(c), c->bytes), "copy in");
        OPS_TRY(c, ops->event_record(p.ev_a, p.comm), "event record");
        OPS_TRY(c, ops->stream_wait_event(p.compute, p.ev_a), "stream wait");
        if (memops) /* B read the previous round's value */
            OPS_TRY(c, ops->stream_wait_value64(p.compute, &p.w_consumed, (uint64_t)r - 1),
                    "value wait");
        else
            OPS_TRY(c, ops->stream_wait_event(p.compute, p.ev_imported), "stream wait");
        OPS_TRY(c, ops->copy_async(p.compute, p.out.ptr, p.in.ptr, c->bytes), "the work");
        if (memops)
            OPS_TRY(c, ops->stream_write_value64(p.compute, &p.w_ready, (uint64_t)r),
                    "value write");
        else
            OPS_TRY(c, ops->event_record(p.ev_b, p.compute), "event record");
        bench_cell_set(&c->go_b, (uint32_t)r);
    }
    rc = 0;
fail:
    peer_close(c, &p, DONE_A, rc == 0 ? DONE_B : 0);
    return rc;
}

/* The stream waits for A's value of round r (`ready`). */
static adag_status_t wait_ready(raw_ctl_t *c, peer_t *p, adag_dev_stream_t *s, long r)
{
    return c->mech == DEV_MECH_MEMOPS
               ? p->ops->stream_wait_value64(s, &p->w_ready, (uint64_t)r)
               : p->ops->stream_wait_event(s, p->ev_imported);
}

/* The stream says B is done reading A's memory of round r (`consumed`). */
static adag_status_t mark_consumed(raw_ctl_t *c, peer_t *p, adag_dev_stream_t *s, long r)
{
    return c->mech == DEV_MECH_MEMOPS
               ? p->ops->stream_write_value64(s, &p->w_consumed, (uint64_t)r)
               : p->ops->event_record(p->ev_a, s);
}

static int role_hop_b(raw_ctl_t *c)
{
    peer_t p;
    const adag_device_ops_t *ops;
    int rc = -1, peer = c->path == DEV_PATH_PEER;
    if (peer_open(c, &p, c->dev_b))
        goto fail;
    ops = p.ops;
    if (peer)
        OPS_TRY(c, ops->mem_alloc(p.dev, c->bytes, &p.in), "device memory");
    OPS_TRY(c, ops->mem_alloc(p.dev, c->bytes, &p.out), "device memory");
    OPS_TRY(c, ops->event_create(p.dev, &p.ev_a), "an event"); /* consumed */
    OPS_TRY(c, ops->event_create(p.dev, &p.ev_b), "an event"); /* B's ready */
    OPS_TRY(c, pin_host(c, &p, host_out(c)), "page-locking the output");
    if (setup_b(c, &p))
        goto fail;
    for (long r = 1; r <= c->rounds; r++) {
        done_args_t done = {c, (uint32_t)r};
        if (bench_cell_wait(&c->go_b, (uint32_t)r, c->policy, &c->abort))
            goto fail;
        if (peer) { /* one peer copy on comm, then the work reads B's own copy */
            OPS_TRY(c, wait_ready(c, &p, p.comm, r), "stream wait");
            OPS_TRY(c, ops->copy_async(p.comm, p.in.ptr, p.imported.ptr, c->bytes), "peer copy");
            OPS_TRY(c, mark_consumed(c, &p, p.comm, r), "consumed");
            OPS_TRY(c, ops->event_record(p.ev_b, p.comm), "event record");
            OPS_TRY(c, ops->stream_wait_event(p.compute, p.ev_b), "stream wait");
            OPS_TRY(c, ops->copy_async(p.compute, p.out.ptr, p.in.ptr, c->bytes), "the work");
        } else { /* zero copy: the work reads A's memory */
            OPS_TRY(c, wait_ready(c, &p, p.compute, r), "stream wait");
            OPS_TRY(c, ops->copy_async(p.compute, p.out.ptr, p.imported.ptr, c->bytes),
                    "the work");
            OPS_TRY(c, mark_consumed(c, &p, p.compute, r), "consumed");
        }
        OPS_TRY(c, ops->event_record(p.ev_b, p.compute), "event record");
        OPS_TRY(c, ops->stream_wait_event(p.comm, p.ev_b), "stream wait");
        OPS_TRY(c, ops->copy_async(p.comm, host_out(c), p.out.ptr, c->bytes), "copy out");
        OPS_TRY(c, ops->launch_host(p.comm, signal_done, &done, sizeof done), "host function");
    }
    rc = 0;
fail:
    peer_close(c, &p, DONE_B, rc == 0 ? DONE_A : 0);
    return rc;
}

static void *hop_b_thread(void *arg)
{
    return (void *)(intptr_t)role_hop_b(arg);
}

/* A and B as two threads of this process (thread actors' hop). */
static int role_hop_threads(raw_ctl_t *c)
{
    pthread_t b;
    void *brc = (void *)(intptr_t)-1;
    if (pthread_create(&b, NULL, hop_b_thread, c) != 0)
        return raw_fail(c, "raw device baseline: a thread for B");
    int rc = role_hop_a(c);
    pthread_join(b, &brc);
    return rc || brc ? -1 : 0;
}

/* The first 8 bytes at a device (or host) address, through the ops. */
static int read_head(raw_ctl_t *c, peer_t *p, const void *src, uint64_t *out)
{
    OPS_TRY(c, p->ops->copy_async(p->comm, out, src, 8), "reading back");
    OPS_TRY(c, p->ops->stream_sync(p->comm, adag__deadline_ms(RAW_SETUP_MS)), "reading back");
    return 0;
fail:
    return -1;
}

/* Device 0 memory for a peer copy, filled from the host pattern. */
static int role_owner(raw_ctl_t *c)
{
    peer_t p;
    int rc = -1;
    if (peer_open(c, &p, c->dev_a))
        goto fail;
    OPS_TRY(c, p.ops->mem_alloc(p.dev, c->bytes, &p.out), "device memory");
    OPS_TRY(c, p.ops->copy_async(p.comm, p.out.ptr, host_in(c), c->bytes), "filling");
    OPS_TRY(c, p.ops->stream_sync(p.comm, adag__deadline_ms(RAW_SETUP_MS)), "filling");
    OPS_TRY(c, p.ops->mem_export(p.dev, &p.out, &c->owner_mem), "exporting memory");
    setup_set(c, OWNER_READY);
    rc = setup_wait(c, COPY_DONE, "end of the copies");
fail:
    peer_close(c, &p, 0, 0);
    return rc;
}

static int role_copy(raw_ctl_t *c)
{
    peer_t p;
    const void *src;
    void *dst;
    uint64_t head = 0;
    int rc = -1;
    if (peer_open(c, &p, c->path == DEV_PATH_PEER ? c->dev_b : c->dev_a))
        goto fail;
    OPS_TRY(c, p.ops->mem_alloc(p.dev, c->bytes, &p.out), "device memory");
    if (c->path == DEV_PATH_H2D) {
        src = host_in(c);
        dst = p.out.ptr;
        OPS_TRY(c, pin_host(c, &p, host_in(c)), "page-locking the input");
    } else if (c->path == DEV_PATH_D2H) {
        OPS_TRY(c, p.ops->copy_async(p.comm, p.out.ptr, host_in(c), c->bytes), "filling");
        src = p.out.ptr;
        dst = host_out(c);
        OPS_TRY(c, pin_host(c, &p, host_out(c)), "page-locking the output");
    } else {
        if (setup_wait(c, OWNER_READY, "memory from the owner"))
            goto fail;
        OPS_TRY(c, import_mem(&p, &c->owner_mem), "importing the owner's memory");
        src = p.imported.ptr;
        dst = p.out.ptr;
    }
    for (long r = 0; r < c->warmup + c->rounds; r++) {
        double t0 = bench_now_us();
        OPS_TRY(c, p.ops->copy_async(p.comm, dst, src, c->bytes), "the copy");
        OPS_TRY(c, p.ops->stream_sync(p.comm, ADAG_FOREVER), "the copy");
        if (r >= c->warmup)
            c->lat[r - c->warmup] = bench_now_us() - t0;
    }
    if (read_head(c, &p, dst, &head))
        goto fail;
    if (head != c->pattern) {
        raw_fail(c, "raw device copy: %llx arrived, want %llx", (unsigned long long)head,
                 (unsigned long long)c->pattern);
        goto fail;
    }
    rc = 0;
fail:
    if (p.imported.ptr && p.dev)
        p.ops->mem_unimport(p.dev, &p.imported);
    setup_set(c, COPY_DONE);
    peer_close(c, &p, 0, 0);
    return rc;
}

int device_raw_peer_main(int argc, char **argv)
{
    struct stat sb;
    raw_ctl_t *c;
    int role = -1;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (int i = 0; argc == 3 && i < NROLES; i++)
        if (!strcmp(argv[2], role_names[i]))
            role = i;
    if (role < 0 || fstat(RAW_FD, &sb) != 0 || (size_t)sb.st_size < sizeof(raw_ctl_t)) {
        fprintf(stderr, "adag-bench --raw-peer: started by adag-bench only\n");
        return 2;
    }
    c = mmap(NULL, (size_t)sb.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, RAW_FD, 0);
    if (c == MAP_FAILED || c->magic != RAW_MAGIC || getppid() != c->parent)
        return 2;
    close(RAW_FD);
    int rc = role == ROLE_HOP_A ? role_hop_a(c)
             : role == ROLE_HOP_B ? role_hop_b(c)
             : role == ROLE_HOP_THREADS ? role_hop_threads(c)
             : role == ROLE_OWNER ? role_owner(c)
                                  : role_copy(c);
    return rc ? 1 : 0;
}

/* ---- the driver side ---- */

typedef struct {
    raw_ctl_t *ctl;
    size_t map_size;
    int fd;
    pid_t pids[2];
    unsigned npids;
    pthread_t reaper;
    int reaper_started;
    _Atomic int failed_child; /* a peer exited non-zero */
} raw_run_t;

static int raw_create(raw_run_t *run, const char *backend, dev_path_t path, size_t bytes,
                      wait_policy_t policy, long rounds, long warmup, dev_mech_t mech,
                      int threads)
{
    const adag_device_ops_t *ops = adag__device_backend_named(backend);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t head = (sizeof(raw_ctl_t) + page - 1) & ~(page - 1);
    size_t stride = (bytes + page - 1) & ~(page - 1);
    memset(run, 0, sizeof(*run));
    run->fd = -1;
    if (!ops || rounds > RAW_MAX_LAT || bytes < 16) {
        fprintf(stderr, "adag-bench: raw device baseline: backend %s, %ld rounds\n", backend,
                rounds);
        return -1;
    }
    run->map_size = head + 2 * stride + page; /* the last page: the words */
    run->fd = memfd_create("adag-bench-raw", MFD_CLOEXEC);
    if (run->fd < 0 || ftruncate(run->fd, (off_t)run->map_size) != 0) {
        perror("adag-bench: raw device baseline: memfd");
        return -1;
    }
    run->ctl = mmap(NULL, run->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, run->fd, 0);
    if (run->ctl == MAP_FAILED) {
        run->ctl = NULL;
        perror("adag-bench: raw device baseline: mmap");
        return -1;
    }
    raw_ctl_t *c = run->ctl;
    c->magic = RAW_MAGIC;
    c->kind = ops->kind;
    c->dev_a = 0;
    c->dev_b = path == DEV_PATH_PEER ? 1 : 0;
    c->path = path;
    c->policy = policy;
    c->bytes = bytes;
    c->host_off = head;
    c->host_stride = stride;
    c->words_off = head + 2 * stride;
    c->mech = mech;
    c->threads = (uint32_t)threads;
    c->pattern = 0x0123456789abcdefull ^ bytes;
    c->rounds = rounds;
    c->warmup = warmup;
    c->parent = (int32_t)getpid();
    memset(host_in(c), 0x3c, bytes);
    memcpy(host_in(c), &c->pattern, 8);
    return 0;
}

static void *reap_peers(void *arg)
{
    raw_run_t *run = arg;
    for (unsigned i = 0; i < run->npids; i++) {
        int status;
        while (waitpid(run->pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            atomic_store(&run->failed_child, 1);
            raw_fail(run->ctl, "raw device baseline: peer %d %s %d", (int)run->pids[i],
                     WIFEXITED(status) ? "exited with" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
    }
    return NULL;
}

static int raw_spawn(raw_run_t *run, const raw_role_t *roles, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        posix_spawn_file_actions_t fa;
        char *argv[] = {"adag-bench", "--raw-peer", (char *)role_names[roles[i]], NULL};
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, run->fd, RAW_FD);
        int err = posix_spawn(&run->pids[run->npids], "/proc/self/exe", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (err) {
            fprintf(stderr, "adag-bench: raw device baseline: spawning a peer: %s\n",
                    strerror(err));
            raw_fail(run->ctl, "spawn failed");
            break;
        }
        run->npids++;
    }
    if (pthread_create(&run->reaper, NULL, reap_peers, run) == 0)
        run->reaper_started = 1;
    return run->npids == n && run->reaper_started ? 0 : -1;
}

/* Waits for the peers (killed once anything aborted); 0 if every peer
 * succeeded and nothing aborted, else the first failure is printed. */
static int raw_wait(raw_run_t *run)
{
    if (!run->ctl)
        return -1;
    if (atomic_load(&run->ctl->abort))
        for (unsigned i = 0; i < run->npids; i++)
            kill(run->pids[i], SIGKILL);
    if (run->reaper_started)
        pthread_join(run->reaper, NULL);
    else
        for (unsigned i = 0; i < run->npids; i++)
            waitpid(run->pids[i], NULL, 0);
    if (atomic_load(&run->ctl->abort) || atomic_load(&run->failed_child)) {
        fprintf(stderr, "adag-bench: %s\n",
                run->ctl->error[0] ? run->ctl->error : "raw device baseline failed");
        return -1;
    }
    return 0;
}

static void raw_free(raw_run_t *run)
{
    if (run->ctl)
        munmap(run->ctl, run->map_size);
    if (run->fd >= 0)
        close(run->fd);
    run->ctl = NULL;
    run->fd = -1;
}

int baseline_device_hop(const char *backend, dev_path_t path, int threads, dev_mech_t mech,
                        size_t bytes, wait_policy_t policy, long rounds, measure_t *m,
                        char *why, size_t why_len)
{
    raw_run_t run;
    static const raw_role_t roles[2] = {ROLE_HOP_A, ROLE_HOP_B};
    static const raw_role_t one[1] = {ROLE_HOP_THREADS};
    long warmup = rounds / 10 < 50 ? 50 : rounds / 10, total = warmup + rounds;
    double *lat = malloc((size_t)rounds * sizeof(*lat)), t_start = 0;
    char *user = malloc(bytes);
    int rc = -1;
    if (raw_create(&run, backend, path, bytes, policy, total, 0, mech, threads) || !lat || !user ||
        bytes < 16)
        goto done;
    raw_ctl_t *c = run.ctl;
    memset(user, 0x5a, bytes);
    if (raw_spawn(&run, threads ? one : roles, threads ? 1 : 2) ||
        setup_wait(c, READY_A | READY_B, "peers ready"))
        goto done;
    for (long r = 1; r <= total; r++) {
        uint64_t stamp = (uint64_t)r * 0x9e3779b97f4a7c15ull, head, tail;
        memcpy(user, &stamp, 8);
        memcpy(user + bytes - 8, &stamp, 8);
        if (r == warmup + 1)
            t_start = bench_now_us();
        double t0 = bench_now_us();
        memcpy(host_in(c), user, bytes); /* execute copies the input into the ring */
        bench_cell_set(&c->go_a, (uint32_t)r);
        if (bench_cell_wait(&c->done, (uint32_t)r, policy, &c->abort))
            goto done;
        double t1 = bench_now_us();
        memcpy(&head, host_out(c), 8);
        memcpy(&tail, host_out(c) + bytes - 8, 8);
        if (head != stamp || tail != stamp) {
            raw_fail(c, "raw device hop: round %ld: stamps %llx / %llx back, want %llx", r,
                     (unsigned long long)head, (unsigned long long)tail,
                     (unsigned long long)stamp);
            goto done;
        }
        if (r > warmup)
            lat[r - warmup - 1] = t1 - t0;
    }
    bench_summarize(lat, rounds, (bench_now_us() - t_start) * 1e-6, m);
    rc = 0;
done:
    if (raw_wait(&run))
        rc = -1;
    if (rc && run.ctl && atomic_load(&run.ctl->unsupported)) {
        snprintf(why, why_len, "%s", run.ctl->error);
        rc = 1;
    }
    raw_free(&run);
    free(lat);
    free(user);
    return rc;
}

int baseline_device_copy(const char *backend, dev_path_t path, size_t bytes, long reps,
                         measure_t *m)
{
    raw_run_t run;
    static const raw_role_t roles[2] = {ROLE_COPY, ROLE_OWNER};
    long warmup = reps / 10 < 2 ? 2 : reps / 10;
    int rc = raw_create(&run, backend, path, bytes, WAIT_FUTEX, reps, warmup, DEV_MECH_DEFAULT, 0);
    if (rc == 0)
        rc = raw_spawn(&run, roles, path == DEV_PATH_PEER ? 2 : 1);
    if (raw_wait(&run))
        rc = -1;
    if (rc == 0) {
        bench_summarize(run.ctl->lat, reps, 0, m);
        m->gbps = bytes / (m->median_us * 1e3);
        m->per_s = 1e6 / m->median_us;
    }
    raw_free(&run);
    return rc;
}
