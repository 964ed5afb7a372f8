/*
 * Suite "geometry": every channel has its own slot size and slot count
 * (adag_node_channel, a static tensor's bytes, the DAG's default).
 *
 *   - an LLM-like chain mixing 4-byte token ids (static i32[1]), an
 *     8 KiB hidden state (a per-node maximum) and 4 MiB of logits (static
 *     f32[1Mi]) over shm (process actors), the emulated device (process
 *     actors on emu:0 and emu:1) and UCX (actors on an agent, loopback):
 *     every byte of every value checked; each channel's slots in the
 *     statistics and the DOT; the memory the DAG holds from the statistics
 *     and from the memfd mappings of the driver and the workers; a value
 *     one element larger than its 8 KiB slot refused naming that channel
 *     and both sizes while the 4 MiB channel has room;
 *   - fewer slots than max_inflight between actors (shm, UCX, and a device
 *     actor whose kernel still reads its host input: that input's writer
 *     waits for it, and the actor must not wait for its next input
 *     first), and the channels where the compiler refuses them.
 */
#include "device_actors.h"
#include "geom_actors.h"
#include "helpers.h"
#include "remote_rig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define INFLIGHT 4
#define RUNS 12
#define OVER_REF 5                 /* stage a writes one byte too many then */
#define HIDDEN_BYTES 8192          /* a's per-node maximum */
#define LOGIT_ELEMS (1 << 20)      /* b's static f32 tensor: 4 MiB */
#define LOGIT_BYTES ((size_t)LOGIT_ELEMS * 4)
#define TOKEN "geometry token"

typedef enum { VIA_SHM, VIA_DEVICE, VIA_UCX } via_t;

static const char *const via_names[] = {"shm", "device", "ucx"};

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static adag_runtime_h geom_runtime(void)
{
    adag_runtime_h rt = h_runtime();
    ASSERT_OK(adag_class_register(rt, &test_geom_class));
    ASSERT_OK(adag_class_register(rt, &test_device_class));
    return rt;
}

/* A "geom" actor: a process actor (on `device`, NULL: none), or on the
 * agent's host. */
static adag_actor_h geom_actor(adag_runtime_h rt, const h_agent_t *ag, const char *name,
                               const char *device, geom_init_t init)
{
    adag_actor_params_t p;
    if (ag) {
        int64_t none = 0;
        p = h_remote_params(ag, name, &none);
        p.class_name = "geom";
        p.init_data = &init;
        p.init_size = sizeof(init);
    } else {
        p = h_actor_params_init("geom", ADAG_PLACEMENT_PROCESS, name, &init, sizeof(init));
    }
    if (device) {
        p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
        p.device = device;
    }
    adag_actor_h a = NULL;
    ASSERT_OK(adag_actor_create(rt, &p, &a));
    return a;
}

static void declare(adag_node_h n, adag_dtype_t dtype, int64_t elems)
{
    adag_tensor_params_t tp = {.field_mask = ADAG_TENSOR_PARAM_DTYPE, .dtype = dtype};
    if (elems >= 0) {
        tp.field_mask |= ADAG_TENSOR_PARAM_SHAPE;
        tp.ndim = 1;
        tp.shape[0] = elems;
    }
    ASSERT_OK(adag_node_tensor(n, &tp));
}

/* The stats of channel `name` of snapshot s (asserts it is there). */
static adag_channel_stats_t chan_stats(adag_stats_h s, const char *name)
{
    for (unsigned i = 0; i < adag_stats_nchannels(s); i++) {
        adag_channel_stats_t c = ADAG_CHANNEL_STATS_INIT;
        ASSERT_OK(adag_stats_channel(s, i, &c));
        if (strcmp(c.name, name) == 0)
            return c;
    }
    cr_assert_fail("no channel %s in the statistics", name);
    return (adag_channel_stats_t){0};
}

/* ---------------------------------------------------------------- */
/* The LLM-like chain: token -> a (8 KiB) -> b (4 MiB) -> c (token)   */
/* ---------------------------------------------------------------- */

typedef struct {
    via_t via;
    h_agent_t ag;
    adag_runtime_h rt;
    adag_actor_h a, b, c;
    adag_dag_h dag;
} llm_t;

static void llm_build(llm_t *t, via_t via)
{
    memset(t, 0, sizeof(*t));
    t->via = via;
    const h_agent_t *ag = NULL;
    if (via == VIA_UCX) {
        h_agent_start(&t->ag, TOKEN, 0);
        unsetenv("ADAG_TOKEN");
        setenv("ADAG_TOKEN_FILE", t->ag.token, 1);
        ag = &t->ag;
    }
    t->rt = geom_runtime();
    const char *dev_a = via == VIA_DEVICE ? "emu:0" : NULL;
    const char *dev_c = via == VIA_DEVICE ? "emu:1" : NULL; /* b -> c: a peer copy */
    t->a = geom_actor(t->rt, ag, "a", dev_a, (geom_init_t){1, ADAG_DTYPE_U8, HIDDEN_BYTES,
                                                           OVER_REF});
    t->b = geom_actor(t->rt, ag, "b", dev_a, (geom_init_t){2, ADAG_DTYPE_F32, LOGIT_ELEMS, -1});
    t->c = geom_actor(t->rt, ag, "c", dev_c, (geom_init_t){3, ADAG_DTYPE_I32, 1, -1});
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(t->rt, &g));
    adag_node_h tok = h_input(g, 0);
    declare(tok, ADAG_DTYPE_I32, 1);
    adag_node_h hidden = h_bind1(g, t->a, "make", tok);
    declare(hidden, ADAG_DTYPE_U8, -1); /* a shape per execution, at most: */
    adag_channel_params_t cp8k = {.field_mask = ADAG_CHANNEL_PARAM_MAX_BYTES,
                                  .max_bytes = HIDDEN_BYTES};
    ASSERT_OK(adag_node_channel(hidden, &cp8k));
    adag_node_h logits = h_bind1(g, t->b, "make", hidden);
    declare(logits, ADAG_DTYPE_F32, LOGIT_ELEMS);
    adag_node_h next = h_bind1(g, t->c, "make", logits);
    declare(next, ADAG_DTYPE_I32, 1);
    adag_node_h outs[3] = {next, hidden, logits};
    ASSERT_OK(adag_graph_output(g, outs, 3));
    char name[32];
    snprintf(name, sizeof(name), "geo_%s", via_names[via]);
    /* the default slot (1 MiB) is smaller than the logits: their channel
     * takes its own size */
    adag_compile_params_t cp = {.field_mask = ADAG_COMPILE_PARAM_MAX_INFLIGHT |
                                              ADAG_COMPILE_PARAM_NAME,
                                .max_inflight = INFLIGHT, .name = name};
    ASSERT_OK(adag_graph_compile(g, &cp, &t->dag));
    ASSERT_OK(adag_graph_destroy(g));
}

static void llm_end(llm_t *t)
{
    ASSERT_OK(adag_runtime_destroy(t->rt));
    if (t->via == VIA_UCX) {
        h_agent_stop(&t->ag);
        h_agent_cleanup(&t->ag);
    }
}

/* Checks output `what` of execution r: a host tensor of dtype and n
 * elements holding geom_fill(h, stage); returns its hash. */
static uint64_t check_value(const adag_value_t *v, const char *what, unsigned r,
                            adag_dtype_t dtype, size_t n, uint64_t h, int stage, void *want)
{
    size_t bytes = n * adag_dtype_size(dtype);
    cr_assert(v->kind == ADAG_VALUE_TENSOR && v->dtype == dtype && v->ndim == 1 &&
                  v->shape[0] == (int64_t)n && v->size == bytes &&
                  v->device == ADAG_DEVICE_HOST,
              "execution %u: %s is kind %d dtype %s [%lld] of %zu bytes on device %d", r, what,
              v->kind, adag_dtype_name(v->dtype), (long long)v->shape[0], v->size, v->device);
    geom_fill(want, bytes, h, stage);
    cr_assert(memcmp(v->data, want, bytes) == 0, "execution %u: %s differs from its reference",
              r, what);
    return geom_hash(v->data, bytes);
}

/* RUNS executions, INFLIGHT at a time: every byte of every output checked;
 * execution OVER_REF refused for a's value one byte over its slot. */
static void llm_run(llm_t *t)
{
    void *want = malloc(LOGIT_BYTES);
    adag_ref_t refs[RUNS];
    int32_t toks[RUNS];
    cr_assert_not_null(want);
    for (unsigned i = 0; i < RUNS + INFLIGHT; i++) {
        if (i >= INFLIGHT) {
            unsigned r = i - INFLIGHT;
            adag_value_t out[3];
            adag_status_t st = adag_dag_get(t->dag, refs[r], out, 3, 30000);
            if (r == OVER_REF) {
                ASSERT_ST(st, ADAG_ERR_TOO_LARGE);
                /* the channel, its own size and the value's, while b's
                 * slots are 512 times larger */
                ASSERT_MSG_HAS("channel a.make[0]");
                ASSERT_MSG_HAS("8193 bytes, larger than the slot capacity of 8192 bytes");
            } else {
                ASSERT_OK(st);
                uint64_t h = geom_hash(&toks[r], sizeof(toks[r]));
                h = check_value(&out[1], "a's hidden state", r, ADAG_DTYPE_U8, HIDDEN_BYTES, h,
                                1, want);
                h = check_value(&out[2], "b's logits", r, ADAG_DTYPE_F32, LOGIT_ELEMS, h, 2,
                                want);
                check_value(&out[0], "c's token", r, ADAG_DTYPE_I32, 1, h, 3, want);
            }
            ASSERT_OK(adag_dag_release(t->dag, refs[r]));
        }
        if (i < RUNS) {
            toks[i] = (int32_t)(1000 + 7 * i);
            adag_value_t in = {.data = &toks[i], .size = 4, .kind = ADAG_VALUE_TENSOR,
                               .dtype = ADAG_DTYPE_I32, .ndim = 1, .shape = {1}};
            ASSERT_OK(adag_dag_execute(t->dag, &in, 1, 0, &refs[i]));
        }
    }
    free(want);
}

/* Each channel's slots in the statistics and the DOT, and the memory they
 * hold: from the statistics and from the memfd mappings of the driver and
 * the workers. */
static void llm_check_memory(llm_t *t)
{
    static const char *const names[4] = {"input[0]", "a.make[0]", "b.make[0]", "c.make[0]"};
    const size_t slot[4] = {4, HIDDEN_BYTES, LOGIT_BYTES, 4};
    adag_stats_h s;
    ASSERT_OK(adag_dag_stats_take(t->dag, &s));
    adag_dag_stats_t ds = ADAG_DAG_STATS_INIT;
    ASSERT_OK(adag_dag_stats(t->dag, &ds));
    cr_assert_eq(ds.struct_size, sizeof(ds));
    size_t host = 0, device = 0;
    for (unsigned i = 0; i < 4; i++) {
        adag_channel_stats_t c = chan_stats(s, names[i]);
        cr_assert_str_eq(c.kind, via_names[t->via], "%s is a %s channel", c.name, c.kind);
        cr_assert(c.slots == INFLIGHT && c.slot_bytes == slot[i],
                  "%s: %u slots of %zu bytes, want %u of %zu", c.name, c.slots, c.slot_bytes,
                  INFLIGHT, slot[i]);
        host += c.host_bytes;
        device += c.device_bytes;
        unsigned ends = 1 + (i == 0 ? 1 : i == 3 ? 1 : 2); /* writer + readers */
        if (t->via == VIA_UCX) {
            /* every endpoint its own ring: slots of a page multiple from a page on */
            size_t stride = slot[i] >= page() ? round_up(slot[i], page()) : round_up(slot[i], 64);
            cr_assert_eq(c.host_bytes, (size_t)ends * INFLIGHT * stride, "%s: %zu host bytes",
                         c.name, c.host_bytes);
        } else {
            /* its ring in the segment: the slots, their headers, whole pages */
            cr_assert(c.host_bytes >= INFLIGHT * slot[i] &&
                          c.host_bytes <= INFLIGHT * (slot[i] + 640) + 2 * page(),
                      "%s: %zu bytes of ring for %u slots of %zu", c.name, c.host_bytes,
                      INFLIGHT, slot[i]);
        }
    }
    cr_assert_eq(ds.device_bytes, device, "the DAG's device bytes %zu, its channels' %zu",
                 ds.device_bytes, device);
    pid_t pids[4] = {getpid(), adag_actor_pid(t->a), adag_actor_pid(t->b), adag_actor_pid(t->c)};
    char seg[48];
    snprintf(seg, sizeof(seg), "adag:geo_%s", via_names[t->via]);
    if (t->via == VIA_UCX) {
        cr_assert_eq(ds.shm_bytes, 0, "no shared memory for ucx channels: %zu", ds.shm_bytes);
        cr_assert_eq(device, 0);
    } else {
        /* the segment: a header page and every ring, as the driver maps it */
        cr_assert_eq(ds.shm_bytes, page() + host, "segment %zu bytes, its rings %zu",
                     ds.shm_bytes, host);
        long long mapped = probe_memfd_bytes(pids, 1, seg);
        cr_assert_eq(mapped, (long long)ds.shm_bytes, "the driver maps %lld bytes of %s",
                     mapped, seg);
        /* what one size for every edge (the largest) would have taken */
        cr_assert_lt(ds.shm_bytes, (size_t)INFLIGHT * LOGIT_BYTES + (size_t)(1 << 20),
                     "segment of %zu bytes", ds.shm_bytes);
    }
    if (t->via == VIA_DEVICE) {
        /* device slots: a's copy of the token (256 B each), a's hidden
         * states (b reads them in place on emu:0), b's logits and c's
         * copy of them on emu:1, c's token */
        size_t want = INFLIGHT * (256 + HIDDEN_BYTES + 2 * LOGIT_BYTES + 256);
        cr_assert_eq(device, want, "device bytes %zu, want %zu", device, want);
        /* the workers' device memory, each allocation once (page-rounded) */
        long long mapped = probe_memfd_bytes(pids, 4, "adag-dev");
        long long pages = (long long)(2 * page() + INFLIGHT * (HIDDEN_BYTES + 2 * LOGIT_BYTES));
        cr_assert_eq(mapped, pages, "the processes map %lld bytes of device memory, want %lld",
                     mapped, pages);
    } else {
        cr_assert_eq(device, 0);
    }
    adag_stats_free(s);
    char *dot = h_dot(t->dag);
    char edge[160];
    for (unsigned i = 1; i < 4; i++) {
        snprintf(edge, sizeof(edge), "%u slots x %zu B\"", INFLIGHT, slot[i]);
        cr_assert(strstr(dot, edge), "no edge labelled \"%s\" in\n%s", edge, dot);
    }
    free(dot);
}

static void llm_over(via_t via)
{
    h_snapshot_t snap;
    h_snapshot(&snap);
    llm_t t;
    llm_build(&t, via);
    llm_check_memory(&t);
    llm_run(&t);
    llm_end(&t);
    h_assert_clean(&snap);
}

Test(geometry, mixed_edges_shm, .timeout = 120)
{
    llm_over(VIA_SHM);
}

Test(geometry, mixed_edges_device, .timeout = 120)
{
    llm_over(VIA_DEVICE);
}

Test(geometry, mixed_edges_ucx, .timeout = 180)
{
    llm_over(VIA_UCX);
}

/* ---------------------------------------------------------------- */
/* Fewer slots                                                        */
/* ---------------------------------------------------------------- */

static void ask_slots(adag_node_h n, unsigned slots)
{
    adag_channel_params_t p = {.field_mask = ADAG_CHANNEL_PARAM_SLOTS, .slots = slots};
    ASSERT_OK(adag_node_channel(n, &p));
}

/* N executions, `window` in flight: out(x) = want(x) for each. */
static void run_window(adag_dag_h dag, unsigned n, unsigned window, int64_t (*want)(int64_t))
{
    adag_ref_t refs[256];
    cr_assert_leq(window, 256u);
    for (unsigned i = 0; i < n + window; i++) {
        if (i >= window) {
            unsigned r = i - window;
            int64_t got = h_get_i64(dag, refs[r % window], 30000);
            cr_assert_eq(got, want(r), "execution %u: %lld, want %lld", r, (long long)got,
                         (long long)want(r));
            ASSERT_OK(adag_dag_release(dag, refs[r % window]));
        }
        if (i < n)
            refs[i % window] = h_execute(dag, (int64_t)i);
    }
}

/* x = a.add(in) and y = b.add(x), one slot each; out = c.sum2(x, y):
 * x is read by two actors, and c waits on both. */
static int64_t reconverge(int64_t in)
{
    int64_t x = in + 1, y = x + 10;
    return x + y + 100;
}

static void one_slot_between_actors(adag_placement_t pl, const h_agent_t *ag)
{
    adag_runtime_h rt = h_runtime();
    const int64_t off[3] = {1, 10, 100};
    adag_actor_h a[3];
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof(name), "r%d", i);
        if (ag) {
            adag_actor_params_t p = h_remote_params(ag, name, &off[i]);
            ASSERT_OK(adag_actor_create(rt, &p, &a[i]));
        } else {
            a[i] = h_counter(rt, pl, name, off[i]);
        }
    }
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_bind1(g, a[0], "add", h_input(g, 0));
    adag_node_h y = h_bind1(g, a[1], "add", x);
    adag_node_h xy[2] = {x, y};
    adag_node_h out = h_bind(g, a[2], "sum2", xy, 2);
    ask_slots(x, 1);
    ask_slots(y, 1);
    ASSERT_OK(adag_graph_output(g, &out, 1));
    adag_dag_h dag = h_compile(g, INFLIGHT, 4096);
    adag_stats_h s;
    ASSERT_OK(adag_dag_stats_take(dag, &s));
    adag_channel_stats_t in = chan_stats(s, "input[0]"), cx = chan_stats(s, "r0.add[0]");
    adag_channel_stats_t cy = chan_stats(s, "r1.add[0]"), co = chan_stats(s, "r2.sum2[0]");
    cr_assert(in.slots == INFLIGHT && co.slots == INFLIGHT && cx.slots == 1 && cy.slots == 1,
              "slots: input %u, x %u, y %u, output %u", in.slots, cx.slots, cy.slots, co.slots);
    cr_assert_lt(cx.host_bytes, in.host_bytes, "x's one slot takes %zu bytes, the input's %u %zu",
                 cx.host_bytes, INFLIGHT, in.host_bytes);
    adag_stats_free(s);
    char *dot = h_dot(dag);
    cr_assert(strstr(dot, "1 slot x 4096 B"), "%s", dot);
    free(dot);
    run_window(dag, 200, INFLIGHT, reconverge);
    ASSERT_OK(adag_runtime_destroy(rt));
}

Test(geometry, one_slot_between_actors_thread, .timeout = 60)
{
    one_slot_between_actors(ADAG_PLACEMENT_THREAD, NULL);
}

Test(geometry, one_slot_between_actors_process, .timeout = 60)
{
    one_slot_between_actors(ADAG_PLACEMENT_PROCESS, NULL);
}

Test(geometry, one_slot_between_actors_ucx, .timeout = 120)
{
    h_agent_t ag;
    h_agent_start(&ag, TOKEN, 0);
    unsetenv("ADAG_TOKEN");
    setenv("ADAG_TOKEN_FILE", ag.token, 1);
    one_slot_between_actors(ADAG_PLACEMENT_REMOTE, &ag);
    h_agent_stop(&ag);
    h_agent_cleanup(&ag);
}

static int64_t plus_five(int64_t in)
{
    return in + 5;
}

/* A device actor's kernel reads its host input 2 ms after its method
 * returned, so the loop holds that input's slot until the kernel ran. With
 * one slot, its writer cannot write the next execution's value before the
 * slot is back: the loop must wait for the kernel before it waits for its
 * next input, or both wait for each other. The log holds every value the
 * kernels read, each from its own execution. */
static void held_input_one_slot(adag_placement_t pl)
{
    enum { N = 40 };
    adag_runtime_h rt = geom_runtime();
    adag_actor_h h = h_counter(rt, pl, "writer", 5);
    adag_actor_params_t p = h_actor_params_init("devactor", pl, "reader", NULL, 0);
    if (pl == ADAG_PLACEMENT_PROCESS)
        p.module_path = ADAG_TEST_DEVICE_MODULE;
    p.field_mask |= ADAG_ACTOR_PARAM_DEVICE;
    p.device = "emu:1";
    adag_actor_h d;
    ASSERT_OK(adag_actor_create(rt, &p, &d));
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h x = h_bind1(g, h, "add", h_input(g, 0));
    ask_slots(x, 1);
    adag_node_h none = h_bind1(g, d, "log_late", x);
    declare(none, ADAG_DTYPE_I64, 1);
    adag_node_h outs[1] = {none};
    ASSERT_OK(adag_graph_output(g, outs, 1));
    adag_dag_h dag = h_compile(g, INFLIGHT, 64);
    adag_ref_t refs[INFLIGHT];
    for (unsigned i = 0; i < N + INFLIGHT; i++) {
        if (i >= INFLIGHT) {
            adag_value_t v;
            ASSERT_OK(adag_dag_get(dag, refs[i % INFLIGHT], &v, 1, 20000));
            ASSERT_OK(adag_dag_release(dag, refs[i % INFLIGHT]));
        }
        if (i < N)
            refs[i % INFLIGHT] = h_execute(dag, 100 + (int64_t)i);
    }
    /* the log, as the reader's loop wrote it */
    int64_t log[N];
    unsigned n = h_device_log(rt, d, log, N);
    cr_assert_eq(n, N, "%u values logged, want %d", n, N);
    for (int64_t k = 0; k < N; k++)
        cr_assert_eq(log[k], plus_five(100 + k),
                     "kernel %lld read %lld in its one-slot input: the slot was written again "
                     "before the kernel that reads it ran",
                     (long long)k, (long long)log[k]);
    ASSERT_OK(adag_runtime_destroy(rt));
}
H_BOTH(geometry, held_input_one_slot, 60)

/* Where fewer slots than max_inflight are refused, each naming the node
 * and why: the driver writes or reads the channel. */
Test(geometry, fewer_slots_refused_for_the_driver, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 1);
    adag_actor_h b = h_counter(rt, ADAG_PLACEMENT_THREAD, "b", 2);
    for (int which = 0; which < 3; which++) {
        adag_graph_h g;
        ASSERT_OK(adag_graph_create(rt, &g));
        adag_node_h in = h_input(g, 0);
        adag_node_h x = h_bind1(g, a, "add", in);
        adag_node_h y = h_bind1(g, b, "add", x);
        ASSERT_OK(adag_graph_output(g, &y, 1));
        ask_slots(which == 0 ? in : which == 1 ? y : x, which == 2 ? INFLIGHT + 1 : 2);
        adag_compile_params_t cp = h_compile_params(INFLIGHT, 0, 0, 0);
        adag_dag_h dag = NULL;
        ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
        cr_assert_null(dag);
        if (which == 0) {
            ASSERT_MSG_HAS("node 0 (input field 0) (channel input[0]) asks for 2 slots");
            ASSERT_MSG_HAS("it is an input field");
            ASSERT_MSG_HAS("adag_dag_reserve hands out max_inflight input slots at once");
        } else if (which == 1) {
            ASSERT_MSG_HAS("(b.add) (channel b.add[0]) asks for 2 slots");
            ASSERT_MSG_HAS("it is a graph output");
        } else {
            ASSERT_MSG_HAS("(channel a.add[0]): slots 5 (adag_node_channel) is more than the "
                           "DAG's max_inflight (4)");
        }
        ASSERT_OK(adag_graph_destroy(g));
    }
    ASSERT_OK(adag_runtime_destroy(rt));
}

/* adag_node_channel's own checks, and a max_bytes below a static tensor's
 * bytes refused at compile naming both sizes. */
Test(geometry, channel_params_checked, .timeout = 30)
{
    adag_runtime_h rt = h_runtime();
    adag_actor_h a = h_counter(rt, ADAG_PLACEMENT_THREAD, "a", 1);
    adag_graph_h g;
    ASSERT_OK(adag_graph_create(rt, &g));
    adag_node_h in = h_input(g, 0);
    adag_channel_params_t p = {.field_mask = ADAG_CHANNEL_PARAM_SLOTS, .slots = 0};
    ASSERT_ST(adag_node_channel(in, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("slots 0 is not in 1..4096");
    p = (adag_channel_params_t){.field_mask = ADAG_CHANNEL_PARAM_MAX_BYTES,
                                .max_bytes = ((size_t)1 << 40) + 1};
    ASSERT_ST(adag_node_channel(in, &p), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("max_bytes 1099511627777 is not in 0..2^40");
    ASSERT_ST(adag_node_channel(NULL, NULL), ADAG_ERR_INVALID);
    adag_node_h three = h_bind1(g, a, "split", in);
    ASSERT_ST(adag_node_channel(three, NULL), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("returns 3 values, each in a channel of its own");
    adag_node_h r0;
    ASSERT_OK(adag_node_output(three, 0, &r0));
    ASSERT_OK(adag_node_channel(r0, NULL)); /* defaults */
    declare(in, ADAG_DTYPE_I64, 4); /* 32 bytes */
    p = (adag_channel_params_t){.field_mask = ADAG_CHANNEL_PARAM_MAX_BYTES, .max_bytes = 16};
    ASSERT_OK(adag_node_channel(in, &p));
    ASSERT_OK(adag_graph_output(g, &r0, 1));
    adag_compile_params_t cp = h_compile_params(2, 0, 0, 0);
    adag_dag_h dag = NULL;
    ASSERT_ST(adag_graph_compile(g, &cp, &dag), ADAG_ERR_INVALID);
    ASSERT_MSG_HAS("node 0 (input field 0) (channel input[0]): max_bytes 16 (adag_node_channel) "
                   "is less than its static tensor's 32 bytes");
    ASSERT_OK(adag_graph_destroy(g));
    ASSERT_OK(adag_runtime_destroy(rt));
}
