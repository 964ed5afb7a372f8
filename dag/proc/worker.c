#include "dag/proc/worker.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "common/settings.h"
#include "dag/exec/actor_device.h"
#include "dag/exec/class.h"
#include "dag/proc/proc.h"
#include "transport/chan_ucx_query.h"
#include "transport/protocol.h"
#include "transport/wire.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct worker_dag {
    struct worker_dag *next;
    struct worker *w;
    uint32_t id;
    adag_dag_ctx_t ctx; /* this process's part of the DAG */
    adag_loop_t loop;
    int started;
    /* the failure this process reported (DAG_FAILED), 0 if none: the
     * status the DAG is aborted with at its end if the driver's ABORT_DAG
     * never came, so that its communicators are aborted, not kept (an
     * atomic: the loop thread stores, the control thread loads) */
    _Atomic int failed;
} worker_dag_t;

typedef struct worker {
    int ctl;
    int remote;         /* ctl is the TCP connection to a driver on another host */
    /* the settings it runs on: its environment's until CREATE_ACTOR brings
     * those of the actor's runtime (then fixed for the worker's life) */
    adag_settings_t settings;
    /* the event socket (its end came with CREATE_ACTOR; -1: none): frames
     * from any thread, one at a time under events_lock */
    int events;
    pthread_mutex_t events_lock;
    int hello;          /* HELLO was received */
    void *module;
    const adag_class_def_t *def;
    void *state;
    char name[ADAG_MAX_NAME];
    adag_method_info_t *methods;
    unsigned nmethods;
    pthread_mutex_t call_lock;
    worker_dag_t *dags;
    adag_actor_device_t *device; /* a device-bound actor's, opened here; NULL: none */
    adag_actor_comms_t comms;    /* its communicators (dag/exec/actor_comm.h) */
    adag_place_t place;          /* where it runs (dag/proc/actor_place.h) */
} worker_t;

static adag_status_t reply(worker_t *w, adag_status_t st, const char *msg, const adag_wbuf_t *body)
{
    adag_wbuf_t wb = {0};
    adag_blob_t b = {NULL, 0};
    if (st == ADAG_OK && body && body->failed) {
        st = ADAG_ERR_NO_MEMORY;
        msg = "worker: out of memory";
    } else if (st == ADAG_OK && body) {
        b = (adag_blob_t){body->data, body->len};
    }
    adag__msg_encode_reply(&wb, st, msg, b);
    if (wb.failed) {
        adag__wbuf_free(&wb);
        return adag__error(ADAG_ERR_NO_MEMORY, "worker: reply");
    }
    /* under events_lock: a remote worker's events share this socket */
    pthread_mutex_lock(&w->events_lock);
    st = adag__ctl_send(w->ctl, ADAG_MSG_REPLY, wb.data, wb.len, NULL, 0);
    pthread_mutex_unlock(&w->events_lock);
    adag__wbuf_free(&wb);
    return st;
}

/* HELLO's answer: this worker's protocol, pid and CPUs. */
static void hello_answer(worker_t *w, adag_wbuf_t *body)
{
    cpu_set_t cpus;
    adag_msg_hello_reply_t r = {ADAG_PROTOCOL_VERSION, (uint32_t)getpid(),
                                sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                                    ? (uint32_t)CPU_COUNT(&cpus)
                                    : 1};
    adag__msg_encode_hello_reply(body, &r);
    w->hello = 1;
}

static adag_status_t hello(worker_t *w, const adag_ctl_msg_t *msg, adag_wbuf_t *body)
{
    adag_msg_hello_t h;
    adag_status_t st = adag__msg_decode_hello(msg, &h);
    if (st != ADAG_OK)
        return st;
    if (h.magic != ADAG_PROTOCOL_MAGIC || h.version != ADAG_PROTOCOL_VERSION)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "the driver speaks control protocol %u (magic 0x%x), this worker %u",
                          h.version, h.magic, ADAG_PROTOCOL_VERSION);
    hello_answer(w, body);
    return ADAG_OK;
}

static int64_t teardown_deadline(const worker_t *w)
{
    return adag__deadline_ms(w->settings.teardown_timeout_ms);
}

/* CREATE_ACTOR's settings become the worker's, before anything of the actor
 * runs: the table's defaults, then the runtime's values (all that it uses
 * travel), so the worker's environment decides nothing of them. A remote
 * worker's connection then keeps the runtime's ADAG_REMOTE_TIMEOUT_MS
 * (the agent tuned it with its own). */
static adag_status_t take_settings(worker_t *w, adag_blob_t pairs)
{
    adag_settings_t s;
    adag_status_t st = adag__settings_defaults(&s);
    if (st == ADAG_OK && (st = adag__msg_apply_settings(pairs, &s)) == ADAG_OK && w->remote)
        st = adag__tcp_tune(w->ctl, s.remote_timeout_ms);
    if (st != ADAG_OK) {
        adag__settings_free(&s);
        return st;
    }
    adag__settings_free(&w->settings);
    w->settings = s;
    return ADAG_OK;
}

static adag_status_t create_actor(worker_t *w, const adag_ctl_msg_t *msg, adag_wbuf_t *body)
{
    static adag_msg_create_t req; /* PATH_MAX: not on the stack */
    char where[PATH_MAX + 16];
    void *handle = NULL, *state = NULL;
    const adag_class_def_t *def = NULL;
    adag_method_info_t *methods = NULL;
    adag_actor_device_t *device = NULL;
    adag_device_kind_t kind = 0;
    unsigned index = 0;
    int init_ran = 0;
    adag_status_t st;

    if (w->def)
        return adag__error(ADAG_ERR_PROTOCOL, "worker already hosts actor %s", w->name);
    if ((st = adag__msg_decode_create(msg, &req)) != ADAG_OK ||
        (st = take_settings(w, req.settings)) != ADAG_OK)
        return st;
    const char *module = req.module, *class_name = req.class_name;
    const void *init_data = req.init.data;
    size_t init_size = req.init.len;
    snprintf(w->name, sizeof(w->name), "%s", req.actor);
    /* the driver checked the text; the device is looked for here */
    if (req.device[0] && (st = adag__device_parse(req.device, &kind, &index)) != ADAG_OK)
        return st;

    /* placed before anything of the actor runs: this thread, and every
     * thread it starts (device streams, DAG loops), is bound; UCX is told
     * its NIC before it reads its configuration */
    char who[96] = "on host ";
    /* the driver names the actor; the host tells a remote actor's apart */
    if (gethostname(who + 8, sizeof(who) - 8) != 0)
        snprintf(who, sizeof(who), "on its host");
    who[sizeof(who) - 1] = '\0';
    if ((st = adag__actor_place_decide(who, req.device[0] ? (int32_t)kind : -1, index, &req.place,
                                      &w->place)) != ADAG_OK ||
        (st = adag__place_apply(&w->place, who)) != ADAG_OK)
        return st;
    adag__ucx_use_net_device(adag__place_nic(&w->place));

    /* load, check the ABI, find and validate the class: dag/exec/class.c */
    if ((st = adag__module_load(module, class_name, init_data, init_size, &handle, &def)) != ADAG_OK)
        return st;
    snprintf(where, sizeof(where), "module %s", module);
    if ((st = adag__class_methods(def, where, &methods)) != ADAG_OK)
        goto fail;
    if (!(state = calloc(1, def->state_size ? def->state_size : 1))) {
        st = adag__error(ADAG_ERR_NO_MEMORY, "state of %zu bytes for class %s", def->state_size,
                        class_name);
        goto fail;
    }
    /* binds this thread, which runs init (and fini) */
    if (req.device[0] &&
        (st = adag__actor_device_open(kind, index, &w->settings, &device)) != ADAG_OK)
        goto fail;
    if (def->init) {
        init_ran = 1;
        /* fini must not run on a failed init (w->def stays NULL); its
         * message goes to the driver in the reply (the driver names the actor) */
        if ((st = adag__class_init(def, state, init_data, init_size, NULL)) != ADAG_OK)
            goto fail;
    }
    w->module = handle;
    w->def = def;
    w->methods = methods;
    w->nmethods = def->nmethods;
    w->state = state;
    w->device = device;
    adag_msg_method_t *mt = calloc(w->nmethods, sizeof(*mt));
    if (!mt)
        return adag__error(ADAG_ERR_NO_MEMORY, "worker: method table");
    for (unsigned i = 0; i < w->nmethods; i++) {
        snprintf(mt[i].name, sizeof(mt[i].name), "%s", w->methods[i].name);
        mt[i].nargs = w->methods[i].nargs;
        mt[i].nreturns = w->methods[i].nreturns;
    }
    adag_msg_place_t placed;
    adag__place_to_msg(&w->place, &placed);
    adag__msg_encode_methods(body, mt, w->nmethods, &placed);
    free(mt);
    return ADAG_OK;
fail:
    /* init may have enqueued work: a device whose work does not end is left */
    if (adag__actor_device_close(device, w->name, teardown_deadline(w)) == ADAG_OK)
        free(state);
    free(methods);
    /* an init that ran may have left threads or handlers in the module, and
     * so may a resolver (adag__module_load keeps such a module) */
    if (!init_ran && !dlsym(handle, "adag_module_resolve"))
        dlclose(handle);
    return st;
}

static void on_fatal(void *ctx, adag_status_t st, const char *msg)
{
    worker_t *w = ctx;
    ADAG_LOG_ERROR("actor %s: %s (%s); the worker exits", w->name, msg, adag_status_str(st));
    _exit(3);
}

/* One DAG failed here without ending the worker (its watchdog saw a
 * device communication op past the comm timeout): the driver is told on
 * the event socket and fails the DAG, then aborts it in every process of
 * the DAG, this one included (ABORT_DAG). Not here first: an abort gives
 * up on peers (the communicator's abort, the abort value in the channels'
 * words), which lets streams in other processes go on with bytes nobody
 * wrote, and those could reach the driver as a good result before it knew
 * the DAG failed. Once the driver has the failure, whatever such a stream
 * publishes belongs to a failed DAG and every get says so. A worker that
 * cannot tell the driver exits (the driver then sees it die). */
static void on_dag_failed(void *ctx, adag_status_t st, const char *msg)
{
    worker_dag_t *d = ctx;
    worker_t *w = d->w;
    adag_msg_failed_t m = {d->id, st, ""};
    adag_wbuf_t b = {0};
    snprintf(m.msg, sizeof(m.msg), "%s", msg);
    adag__msg_encode_failed(&b, &m);
    adag_status_t sent = ADAG_ERR_CLOSED;
    pthread_mutex_lock(&w->events_lock);
    if (w->events >= 0 && !b.failed)
        sent = adag__ctl_send(w->events, ADAG_MSG_DAG_FAILED, b.data, b.len, NULL, 0);
    pthread_mutex_unlock(&w->events_lock);
    adag__wbuf_free(&b);
    atomic_store_explicit(&d->failed, (int)st, memory_order_relaxed);
    if (sent != ADAG_OK)
        on_fatal(w, st, msg);
}

static worker_dag_t *find_dag(worker_t *w, uint32_t id, worker_dag_t ***link)
{
    for (worker_dag_t **p = &w->dags; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            if (link)
                *link = p;
            return *p;
        }
    return NULL;
}

static void dag_free(worker_dag_t *d)
{
    int failed = atomic_load_explicit(&d->failed, memory_order_relaxed);
    adag__ctx_abort(&d->ctx, failed ? (adag_status_t)failed : ADAG_ERR_CLOSED);
    adag__loop_close(&d->loop);
    adag__ctx_destroy(&d->ctx);
    free(d);
}

/* PREPARE_DAG: attach the domains, open the loop's endpoints, answer with
 * their peer info. */
static adag_status_t prepare_dag(worker_t *w, adag_ctl_msg_t *msg, adag_wbuf_t *body)
{
    adag_msg_prepare_t m;
    adag_program_t prog;
    adag_status_t st;

    if (!w->def)
        return adag__error(ADAG_ERR_PROTOCOL, "PREPARE_DAG before CREATE_ACTOR");
    if ((st = adag__msg_decode_prepare(msg, &m)) != ADAG_OK)
        return st;
    if (find_dag(w, m.dag_id, NULL))
        return adag__error(ADAG_ERR_PROTOCOL, "DAG %u is already installed", m.dag_id);
    adag_rbuf_t rb = {m.program.data, m.program.len, 0, 0};
    if ((st = adag__program_decode(&rb, w->nmethods, &prog)) != ADAG_OK)
        return st;
    if (prog.dag_id != m.dag_id) {
        adag__program_free(&prog);
        return adag__error(ADAG_ERR_PROTOCOL, "PREPARE_DAG %u carries the program of DAG %u",
                          m.dag_id, prog.dag_id);
    }
    worker_dag_t *d = calloc(1, sizeof(*d));
    if (!d) {
        adag__program_free(&prog);
        return adag__error(ADAG_ERR_NO_MEMORY, "prepare DAG %u", m.dag_id);
    }
    d->id = m.dag_id;
    adag__ctx_init(&d->ctx);
    st = adag__ctx_import_domains(&d->ctx, m.domains, msg->fds, msg->nfds);
    msg->nfds = 0; /* taken, even on failure */
    if (st != ADAG_OK) {
        adag__program_free(&prog);
        goto fail;
    }
    adag_loop_actor_t la = {
        .state = w->state,
        .call_lock = &w->call_lock,
        .methods = w->methods,
        .nmethods = w->nmethods,
        .name = w->name,
        .device = w->device ? &w->device->chan : NULL,
        .comms = &w->comms,
        .has_numa = w->place.numa >= 0 && w->place.this_system,
        .numa = w->place.numa,
        .settings = &w->settings,
    };
    st = adag__loop_prepare(&d->loop, &d->ctx, &prog, &la, body);
    if (st != ADAG_OK)
        goto fail;
    d->loop.on_fatal = on_fatal;
    d->loop.fatal_ctx = w;
    d->loop.on_fail = on_dag_failed;
    d->loop.fail_ctx = d;
    d->w = w;
    d->next = w->dags;
    w->dags = d;
    return ADAG_OK;
fail:
    dag_free(d);
    return st;
}

static adag_status_t connect_dag(worker_t *w, const adag_ctl_msg_t *msg)
{
    adag_msg_connect_t m;
    adag_status_t st = adag__msg_decode_connect(msg, &m);
    if (st != ADAG_OK)
        return st;
    worker_dag_t *d = find_dag(w, m.dag_id, NULL);
    if (!d || d->started)
        return adag__error(ADAG_ERR_PROTOCOL, "CONNECT_DAG %u: %s", m.dag_id,
                          d ? "already started" : "no such DAG is prepared");
    return adag__loop_connect(&d->loop, m.peers);
}

/* START_DAG, ABORT_DAG, STOP_DAG */
static adag_status_t dag_message(worker_t *w, const adag_ctl_msg_t *msg)
{
    adag_msg_dag_t m;
    worker_dag_t **link = NULL;
    adag_status_t st = adag__msg_decode_dag(msg, &m);
    if (st != ADAG_OK)
        return st;
    worker_dag_t *d = find_dag(w, m.dag_id, &link);
    if (msg->type == ADAG_MSG_ABORT_DAG) {
        if (d) /* the DAG may be gone already: nothing to abort */
            adag__ctx_abort(&d->ctx, m.status);
        return ADAG_OK;
    }
    if (!d)
        return adag__error(ADAG_ERR_NOT_FOUND, "no DAG %u is installed", m.dag_id);
    if (msg->type == ADAG_MSG_START_DAG) {
        if (d->started)
            return adag__error(ADAG_ERR_PROTOCOL, "DAG %u is already started", m.dag_id);
        if ((st = adag__loop_start(&d->loop)) == ADAG_OK)
            d->started = 1;
        return st;
    }
    /* STOP_DAG's drop: the communicators the driver let go (dag/proc/comm_lease.c)
     * are dropped first, so nothing of them keeps the loop's streams waiting */
    for (uint32_t i = 0; i < d->loop.prog.ncomms && i < 64; i++)
        if (m.drop >> i & 1)
            adag__actor_comm_drop(&w->comms, d->loop.prog.comms[i].key);
    *link = d->next;
    dag_free(d);
    return ADAG_OK;
}

/* The installed DAG a TRACE_DAG or STATS_DAG names. */
static adag_status_t named_dag(worker_t *w, const adag_ctl_msg_t *msg, worker_dag_t **d)
{
    adag_msg_dag_t m;
    adag_status_t st = adag__msg_decode_dag(msg, &m);
    if (st != ADAG_OK)
        return st;
    if (!(*d = find_dag(w, m.dag_id, NULL)))
        return adag__error(ADAG_ERR_NOT_FOUND, "no DAG %u is installed", m.dag_id);
    return ADAG_OK;
}

/* TRACE_DAG: a copy of the DAG's loop records, taken while the loop runs
 * (common/trace.h), with this process's clock. */
static adag_status_t trace_dag(worker_t *w, const adag_ctl_msg_t *msg, adag_wbuf_t *body)
{
    worker_dag_t *d;
    adag_trace_rec_t *recs;
    uint64_t n, lost;
    adag_status_t st = named_dag(w, msg, &d);
    if (st != ADAG_OK || (st = adag__loop_trace_copy(&d->loop, &recs, &n, &lost)) != ADAG_OK)
        return st;
    adag__msg_encode_trace(body, (uint64_t)adag__now_ns(), lost, recs, n);
    free(recs);
    return ADAG_OK;
}

/* STATS_DAG: the DAG's loop figures now (dag/exec/loop_stats.h). */
static adag_status_t stats_dag(worker_t *w, const adag_ctl_msg_t *msg, adag_wbuf_t *body)
{
    worker_dag_t *d;
    adag_loop_figures_t f;
    adag_status_t st = named_dag(w, msg, &d);
    if (st != ADAG_OK || (st = adag__loop_figures(&d->loop, &f)) != ADAG_OK)
        return st;
    adag__msg_encode_figures(body, &f);
    adag__loop_figures_free(&f);
    return ADAG_OK;
}

int adag__worker_main(int argc, char **argv)
{
    worker_t w;
    memset(&w, 0, sizeof(w));
    w.ctl = -1;
    w.events = -1;
    pthread_mutex_init(&w.call_lock, NULL);
    pthread_mutex_init(&w.events_lock, NULL);
    if (adag__settings_from_env(&w.settings) != ADAG_OK) {
        fprintf(stderr, "adag-worker: %s\n", adag_last_error());
        return 2;
    }
    adag__actor_comms_init(&w.comms, &w.settings);
    const char *agent = NULL, *port_file = NULL;
    int remote = 0;
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--control-fd") == 0)
            w.ctl = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--remote-fd") == 0)
            w.ctl = atoi(argv[i + 1]), remote = w.remote = 1;
        else if (strcmp(argv[i], "--agent") == 0)
            agent = argv[i + 1];
        else if (strcmp(argv[i], "--port-file") == 0)
            port_file = argv[i + 1];
    }
    if (agent)
        return adag__agent_main(agent, port_file);
    if (w.ctl < 0) {
        fprintf(stderr,
                "adag-worker hosts a process actor for libadag.\n"
                "  adag-worker --agent HOST:PORT [--port-file FILE]\n"
                "      serves drivers on other hosts: each that presents the token of\n"
                "      ADAG_TOKEN_FILE (or ADAG_TOKEN) gets a worker; FILE receives the\n"
                "      address bound (port 0: one the kernel picks)\n"
                "  adag-worker --pmix -- PROGRAM [ARGS...]\n"
                "      one rank of an mpirun/srun job: rank 0 runs PROGRAM (the driver),\n"
                "      the others serve it as agents (addresses and token through PMIx)\n"
                "  adag-worker --control-fd N\n"
                "      how the runtime starts it on its own host (not by hand)\n");
        return 2;
    }
    snprintf(w.name, sizeof(w.name), "(worker %d)", (int)getpid());
    if (remote) {
        /* the agent checked HELLO; the answer is ours. Events (DAG_FAILED)
         * share the connection: nothing else can cross hosts */
        adag_wbuf_t body = {0};
        w.events = w.ctl;
        hello_answer(&w, &body);
        adag_status_t st = reply(&w, ADAG_OK, NULL, &body);
        adag__wbuf_free(&body);
        if (st != ADAG_OK)
            _exit(0);
    }
    for (;;) {
        adag_ctl_msg_t msg;
        adag_wbuf_t body = {0};
        adag_status_t st = adag__ctl_recv(w.ctl, ADAG_FOREVER, &msg);
        if (st != ADAG_OK) {
            /* the driver is gone, or the framing broke (nothing after it can
             * be trusted): leave at once; the kernel frees our mappings and
             * the memfds die with the last user */
            if (st != ADAG_ERR_CLOSED)
                ADAG_LOG_ERROR("actor %s: control socket: %s", w.name, adag_last_error());
            _exit(st == ADAG_ERR_CLOSED ? 0 : 4);
        }
        const adag_msg_info_t *info = adag__msg_info(msg.type);
        int shutdown = 0, answer = !info || !info->one_way;
        if ((st = adag__msg_check(&msg)) != ADAG_OK) {
            /* a whole frame of an unknown type or with too many fds: say so */
            answer = 1;
        } else if (!w.hello && msg.type != ADAG_MSG_HELLO) {
            st = adag__error(ADAG_ERR_PROTOCOL, "the first message must be HELLO, not %s",
                            info->name);
            shutdown = answer = 1;
        } else {
            switch ((adag_msg_type_t)msg.type) {
            case ADAG_MSG_HELLO:
                if (w.hello) {
                    st = adag__error(ADAG_ERR_PROTOCOL, "HELLO was already received");
                } else {
                    st = hello(&w, &msg, &body);
                    shutdown = st != ADAG_OK; /* a driver of another version: leave */
                }
                break;
            case ADAG_MSG_CREATE_ACTOR:
                st = create_actor(&w, &msg, &body);
                if (st == ADAG_OK && msg.nfds == 1 && w.events < 0) {
                    w.events = msg.fds[0]; /* taken from the message */
                    msg.nfds = 0;
                }
                break;
            case ADAG_MSG_PREPARE_DAG:
                st = prepare_dag(&w, &msg, &body);
                break;
            case ADAG_MSG_CONNECT_DAG:
                st = connect_dag(&w, &msg);
                break;
            case ADAG_MSG_START_DAG:
            case ADAG_MSG_ABORT_DAG:
            case ADAG_MSG_STOP_DAG:
                st = dag_message(&w, &msg);
                break;
            case ADAG_MSG_TRACE_DAG:
                st = trace_dag(&w, &msg, &body);
                break;
            case ADAG_MSG_STATS_DAG:
                st = stats_dag(&w, &msg, &body);
                break;
            case ADAG_MSG_CLOCK:
                adag__msg_encode_clock(&body, (uint64_t)adag__now_ns(), adag__boot_id());
                break;
            case ADAG_MSG_SHUTDOWN:
                while (w.dags) {
                    worker_dag_t *d = w.dags;
                    w.dags = d->next;
                    dag_free(d);
                }
                adag__actor_comms_destroy(&w.comms);
                /* drain, fini, close (dag/exec/actor_device.h); what does not
                 * end in time is logged and left: the process exits */
                (void)adag__actor_device_stop(w.device, w.name, teardown_deadline(&w),
                                             w.def ? w.def->fini : NULL, w.state);
                w.device = NULL;
                st = ADAG_OK;
                shutdown = 1;
                break;
            case ADAG_MSG_REPLY:
            case ADAG_MSG_DAG_FAILED:
            case ADAG_MSG_END:
                st = adag__error(ADAG_ERR_PROTOCOL, "a worker is not sent %s",
                                adag__msg_info(msg.type)->name);
                answer = 1;
                break;
            }
        }
        adag__ctl_msg_free(&msg);
        if (answer && reply(&w, st, adag_last_error(), &body) != ADAG_OK)
            _exit(0);
        adag__wbuf_free(&body);
        if (shutdown)
            _exit(st == ADAG_OK ? 0 : 4);
    }
}
