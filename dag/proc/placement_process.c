/*
 * Process actors: one adag-worker per actor, spawned by the runtime's
 * monitor thread, spoken to over a Unix socket with the control protocol
 * (transport/protocol.h), watched through its pidfd. A device-bound
 * actor's device is named in CREATE_ACTOR and opened by the worker, where
 * its code runs (dag/proc/worker.c); the driver only checked the text.
 *
 * Locks: ctl_lock makes one request at a time (held from its send to its
 * reply); send_lock makes one frame at a time and is a leaf (nothing is
 * taken under it), so ABORT_DAG, which needs no reply, can be sent from
 * any thread holding any other lock. Order: ctl_lock -> rt->lock ->
 * run->lock -> send_lock.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/fd.h"
#include "common/log.h"
#include "common/settings.h"
#include "dag/proc/proc.h"
#include "dag/proc/remote_link.h"
#include "transport/spawn.h"
#include "transport/tcp.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int pid, pidfd, ctl;
    int events; /* the driver's end of the event socket (the monitor reads it), -1: none */
    /* a remote actor (ADAG_PLACEMENT_REMOTE): its TCP link, in place of
     * the pidfd; ctl is the local end of the link's relay */
    adag_remote_link_t *remote;
    pthread_mutex_t ctl_lock;
    pthread_mutex_t send_lock;
    /* replies owed to requests given up on (an observation's deadline, a
     * step's), in the order asked: the next reader drops that many frames
     * first; since when the oldest is owed. Under ctl_lock. */
    unsigned owed;
    int64_t owed_since;
} process_actor_t;

static process_actor_t *proc_of(adag_actor_h a)
{
    return a->impl;
}

static int64_t control_deadline(adag_actor_h a)
{
    return adag__deadline_ms(a->rt->settings.control_timeout_ms);
}

static const char *purpose(uint32_t type)
{
    const adag_msg_info_t *info = adag__msg_info(type);
    return info ? info->purpose : "answer";
}

/* Sends one frame (ctl_lock held for requests). */
static adag_status_t request_send(adag_actor_h a, uint32_t type, const adag_wbuf_t *payload,
                                  const int *fds, unsigned nfds)
{
    process_actor_t *p = proc_of(a);
    adag_status_t st;
    pthread_mutex_lock(&a->rt->lock);
    int dead = a->dead;
    if (dead)
        st = adag__error(ADAG_ERR_ACTOR_DIED, "%s", a->death);
    pthread_mutex_unlock(&a->rt->lock);
    if (dead)
        return st;
    if (payload && payload->failed)
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", a->name);
    pthread_mutex_lock(&p->send_lock);
    st = adag__ctl_send(p->ctl, type, payload ? payload->data : NULL, payload ? payload->len : 0,
                       fds, nfds);
    pthread_mutex_unlock(&p->send_lock);
    if (st == ADAG_ERR_CLOSED)
        return adag__error(ADAG_ERR_ACTOR_DIED, "actor %s (pid %d) died while asked to %s",
                          a->name, p->pid, purpose(type));
    if (st != ADAG_OK)
        adag__error_prefix("actor %s", a->name);
    return st;
}

/* 1 once fd is readable (a frame begins, or the peer hung up) by
 * `deadline`, else 0. */
static int frame_begins(int fd, int64_t deadline)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    int r;
    while ((r = poll(&pfd, 1, adag__ms_left(deadline))) < 0 && errno == EINTR) {
    }
    return r > 0;
}

/* Receives the reply to a request sent (ctl_lock held), after dropping
 * the replies owed to requests given up on. Each frame must begin by
 * `begin` -- else ADAG_ERR_TIMEOUT and this reply is owed too -- and once
 * begun end by `deadline` (an answer under way is read whole). On success
 * *reply (when given) owns the message and body points into it. */
static adag_status_t request_recv_by(adag_actor_h a, uint32_t type, int64_t begin,
                                     int64_t deadline, adag_ctl_msg_t *reply, adag_blob_t *body)
{
    process_actor_t *p = proc_of(a);
    adag_ctl_msg_t msg;
    adag_msg_reply_t r;
    adag_status_t st;
    for (;;) {
        if (!frame_begins(p->ctl, begin)) {
            if (p->owed++ == 0)
                p->owed_since = adag__now_ns();
            return adag__error(ADAG_ERR_TIMEOUT, "actor %s (pid %d) did not %s in time",
                              a->name, p->pid, purpose(type));
        }
        st = adag__msg_recv(p->ctl, deadline, &msg);
        if (st != ADAG_OK || !p->owed)
            break;
        adag__ctl_msg_free(&msg); /* the late answer to a request given up on */
        p->owed--;
    }
    if (st == ADAG_ERR_CLOSED)
        return adag__error(ADAG_ERR_ACTOR_DIED, "actor %s (pid %d) died while asked to %s",
                          a->name, p->pid, purpose(type));
    if (st == ADAG_ERR_TIMEOUT)
        return adag__error(ADAG_ERR_TIMEOUT, "actor %s (pid %d) did not %s in time", a->name,
                          p->pid, purpose(type));
    if (st != ADAG_OK) {
        adag__error_prefix("actor %s", a->name);
        return st;
    }
    st = adag__msg_decode_reply(&msg, &r);
    if (st != ADAG_OK) {
        adag__error_prefix("actor %s, answering %s", a->name, adag__msg_info(type)->name);
    } else if (r.status != ADAG_OK) {
        st = r.status < ADAG_OK && r.status >= ADAG_ERR_INTERNAL
                 ? adag__error(r.status, "actor %s: %s", a->name, r.msg)
                 : adag__error(ADAG_ERR_PROTOCOL, "actor %s answered %s with status %d", a->name,
                              adag__msg_info(type)->name, (int)r.status);
    }
    if (st == ADAG_OK && reply) {
        *reply = msg;
        if (body)
            *body = r.body;
    } else {
        adag__ctl_msg_free(&msg);
    }
    return st;
}

static adag_status_t request_recv(adag_actor_h a, uint32_t type, int64_t deadline,
                                  adag_ctl_msg_t *reply, adag_blob_t *body)
{
    return request_recv_by(a, type, deadline, deadline, reply, body);
}

static adag_status_t request(adag_actor_h a, uint32_t type, const adag_wbuf_t *payload,
                             int64_t deadline, adag_ctl_msg_t *reply, adag_blob_t *body)
{
    process_actor_t *p = proc_of(a);
    pthread_mutex_lock(&p->ctl_lock);
    adag_status_t st = request_send(a, type, payload, NULL, 0);
    if (st == ADAG_OK)
        st = request_recv(a, type, deadline, reply, body);
    pthread_mutex_unlock(&p->ctl_lock);
    return st;
}

/* ---- creation ---- */

/* A worker that failed while being created: say how it ended (the monitor
 * reaps it; a worker that closed its socket is normally dying already). */
static adag_status_t creation_failed(adag_actor_h a, adag_status_t st, const char *module)
{
    char msg[ADAG_ERROR_MAX];
    snprintf(msg, sizeof(msg), "%s", adag_last_error());
    if (st == ADAG_ERR_ACTOR_DIED && adag__actor_wait_reaped(a, adag__deadline_ms(2000))) {
        pthread_mutex_lock(&a->rt->lock);
        st = adag__error(ADAG_ERR_ACTOR_DIED,
                        "adag_actor_create: %s while creating the actor (class %s, module %s)",
                        a->death, a->class_name, module);
        pthread_mutex_unlock(&a->rt->lock);
    } else {
        a->ops->kill(a, "its creation failed");
        st = adag__error(st, "%s", msg);
    }
    return st;
}

/* The HELLO of a remote actor whose link ended before it was answered
 * (st: ADAG_ERR_ACTOR_DIED). An agent that refused the driver (no slot
 * free, wrong token) sent its REPLY before it closed, and the relay passes
 * a frame on before it marks the link down, so that refusal is already on
 * the control socket, even when the HELLO itself never left: it is the
 * answer. Else the death stands, with its message. */
static adag_status_t remote_refusal(adag_actor_h a, adag_status_t st)
{
    process_actor_t *p = proc_of(a);
    char died[ADAG_ERROR_MAX];
    snprintf(died, sizeof(died), "%s", adag_last_error());
    pthread_mutex_lock(&p->ctl_lock);
    adag_status_t got = request_recv(a, ADAG_MSG_HELLO, adag__now_ns(), NULL, NULL);
    pthread_mutex_unlock(&p->ctl_lock);
    if (got == ADAG_OK || got == ADAG_ERR_ACTOR_DIED || got == ADAG_ERR_TIMEOUT)
        return adag__error(st, "%s", died);
    return got;
}

static adag_status_t hello(adag_actor_h a)
{
    adag_wbuf_t wb = {0};
    adag_ctl_msg_t reply;
    adag_blob_t body;
    adag_msg_hello_t h = {ADAG_PROTOCOL_MAGIC, ADAG_PROTOCOL_VERSION, {NULL, 0}};
    adag_msg_hello_reply_t hr;
    char token[ADAG_TOKEN_MAX];
    size_t token_len = 0;
    process_actor_t *p = proc_of(a);
    if (p->remote) { /* the agent checks it */
        adag_status_t st = adag__token_load(&a->rt->settings, token, &token_len);
        if (st != ADAG_OK) {
            adag__error_prefix("actor %s on node %s", a->name, a->node);
            return st;
        }
        h.token = (adag_blob_t){token, token_len};
    }
    adag__msg_encode_hello(&wb, &h);
    adag_status_t st = request(a, ADAG_MSG_HELLO, &wb, control_deadline(a), &reply, &body);
    adag__wbuf_free(&wb);
    if (st == ADAG_ERR_ACTOR_DIED && p->remote)
        st = remote_refusal(a, st);
    if (st != ADAG_OK)
        return st;
    st = adag__msg_decode_hello_reply(body, &hr);
    adag__ctl_msg_free(&reply);
    if (st != ADAG_OK) {
        adag__error_prefix("actor %s", a->name);
        return st;
    }
    if (hr.version != ADAG_PROTOCOL_VERSION)
        return adag__error(ADAG_ERR_PROTOCOL,
                          "actor %s: the worker speaks control protocol %u, this library %u",
                          a->name, hr.version, ADAG_PROTOCOL_VERSION);
    if (p->remote) {
        pthread_mutex_lock(&a->rt->lock);
        p->pid = (int)hr.pid; /* its pid on its host */
        pthread_mutex_unlock(&a->rt->lock);
    }
    return ADAG_OK;
}

static adag_status_t create_worker_actor(adag_actor_h a, const adag_actor_params_t *params,
                                         adag_blob_t init)
{
    const char *module = params->module_path;
    adag_msg_place_t place;
    adag_wbuf_t wb = {0}, settings = {0};
    adag_ctl_msg_t reply;
    adag_blob_t body;
    adag_msg_method_t *m = NULL;
    unsigned n = 0;
    char device[ADAG_DEVICE_SPEC_MAX] = ""; /* the worker opens it */
    if (a->device_kind >= 0)
        snprintf(device, sizeof(device), "%s:%u", adag_device_kind_name((uint32_t)a->device_kind),
                 a->device_index);
    adag__actor_place_request(params, a->rt->settings.placement != 0, &place);
    /* the worker runs on its runtime's settings, not on its environment's */
    adag__msg_encode_settings(&settings, &a->rt->settings);
    adag__msg_encode_create(&wb, module, a->class_name, a->name, device, init, &place,
                           (adag_blob_t){settings.data, settings.len});
    if (settings.failed)
        wb.failed = 1;
    adag__wbuf_free(&settings);
    /* the event socket: the worker's end goes with CREATE_ACTOR */
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        adag__wbuf_free(&wb);
        return adag__error_errno(errno, "actor %s: event socket", a->name);
    }
    if ((sv[0] = adag__fd_above_stdio(sv[0])) < 0) {
        adag_status_t err = adag__error_errno(errno, "actor %s: event socket", a->name);
        close(sv[1]);
        adag__wbuf_free(&wb);
        return err;
    }
    process_actor_t *p = proc_of(a);
    pthread_mutex_lock(&p->ctl_lock);
    adag_status_t st = request_send(a, ADAG_MSG_CREATE_ACTOR, &wb, &sv[1], 1);
    if (st == ADAG_OK)
        st = request_recv(a, ADAG_MSG_CREATE_ACTOR, control_deadline(a), &reply, &body);
    pthread_mutex_unlock(&p->ctl_lock);
    adag__wbuf_free(&wb);
    close(sv[1]);
    if (st != ADAG_OK) {
        close(sv[0]);
        return st;
    }
    pthread_mutex_lock(&a->rt->lock);
    p->events = sv[0];
    pthread_mutex_unlock(&a->rt->lock);
    adag__monitor_poke(a->rt);
    st = adag__msg_decode_methods(body, &m, &n, &place);
    adag__ctl_msg_free(&reply);
    if (st == ADAG_OK && (st = adag__place_from_msg(&place, &a->place)) != ADAG_OK)
        free(m);
    if (st != ADAG_OK) {
        adag__error_prefix("actor %s", a->name);
        return st;
    }
    a->methods = calloc(n, sizeof(*a->methods));
    if (!a->methods) {
        free(m);
        return adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", a->name);
    }
    for (unsigned i = 0; i < n; i++) {
        snprintf(a->methods[i].name, sizeof(a->methods[i].name), "%s", m[i].name);
        a->methods[i].nargs = m[i].nargs;
        a->methods[i].nreturns = m[i].nreturns;
    }
    a->nmethods = n;
    free(m);
    return ADAG_OK;
}

static adag_status_t process_create(adag_actor_h a, const adag_actor_params_t *p, adag_blob_t init)
{
    adag_status_t st;
    int pid, pidfd, ctl;
    if (!(p->field_mask & ADAG_ACTOR_PARAM_MODULE) || !p->module_path || !*p->module_path)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_actor_create: process actor %s needs module_path "
                          "(ADAG_ACTOR_PARAM_MODULE)",
                          a->name);
    size_t path_len = strlen(p->module_path);
    if (path_len >= PATH_MAX)
        return adag__error(ADAG_ERR_INVALID,
                          "adag_actor_create: module_path of actor %s is %zu bytes, longer than "
                          "the system's path limit PATH_MAX - 1 (%d bytes)",
                          a->name, path_len, PATH_MAX - 1);
    process_actor_t *pa = calloc(1, sizeof(*pa));
    if (!pa)
        return adag__error(ADAG_ERR_NO_MEMORY, "adag_actor_create: out of memory");
    pa->pidfd = pa->ctl = pa->events = -1;
    pthread_mutex_init(&pa->ctl_lock, NULL);
    pthread_mutex_init(&pa->send_lock, NULL);
    a->impl = pa;
    if (a->node[0]) {
        pid = 0;
        pidfd = -1;
        st = adag__remote_open(a->node, control_deadline(a), a->rt->settings.remote_timeout_ms,
                              &ctl, &pa->remote);
    } else {
        st = adag__monitor_spawn(a->rt, &pid, &pidfd, &ctl);
    }
    if (st != ADAG_OK) {
        adag__error_prefix("adag_actor_create %s", a->name);
        return st;
    }
    /* from here on the monitor watches it (it is in rt->actors) */
    pthread_mutex_lock(&a->rt->lock);
    pa->pid = pid;
    pa->pidfd = pidfd;
    pa->ctl = ctl;
    pthread_mutex_unlock(&a->rt->lock);
    adag__monitor_poke(a->rt);
    if ((st = hello(a)) != ADAG_OK || (st = create_worker_actor(a, p, init)) != ADAG_OK)
        return creation_failed(a, st, p->module_path);
    return ADAG_OK;
}

/* ---- DAG steps ---- */

static void process_lock(adag_actor_h a)
{
    pthread_mutex_lock(&proc_of(a)->ctl_lock);
}

static void process_unlock(adag_actor_h a)
{
    pthread_mutex_unlock(&proc_of(a)->ctl_lock);
}

static const uint32_t step_msg[] = {
    [ADAG_STEP_PREPARE] = ADAG_MSG_PREPARE_DAG,
    [ADAG_STEP_CONNECT] = ADAG_MSG_CONNECT_DAG,
    [ADAG_STEP_START] = ADAG_MSG_START_DAG,
    [ADAG_STEP_STOP] = ADAG_MSG_STOP_DAG,
};

static adag_status_t process_step_begin(adag_actor_h a, adag_dag_run_t *run, unsigned ai,
                                        adag_step_t step, int *pending)
{
    adag_dag_actor_t *da = &run->actors[ai];
    adag_wbuf_t wb = {0}, prog = {0}, domains = {0};
    int fds[ADAG_CTL_MAX_FDS] = {0}; /* gcc 13 cannot see that nfds guards it */
    unsigned nfds = 0;
    adag_status_t st = ADAG_OK;
    *pending = 0;
    switch (step) {
    case ADAG_STEP_PREPARE: {
        adag__program_encode(&da->prog, &prog);
        /* only the domains its channels use (a remote worker's carry no fds) */
        uint32_t kinds = 0;
        for (uint32_t c = 0; c < da->prog.nchans; c++)
            kinds |= 1u << da->prog.chans[c].backend;
        st = adag__ctx_export_domains_of(&run->ctx, kinds, &domains, fds, &nfds,
                                        ADAG_CTL_MAX_FDS);
        adag_msg_prepare_t m = {run->id, {prog.data, prog.len}, {domains.data, domains.len}};
        adag__msg_encode_prepare(&wb, &m);
        if (prog.failed)
            wb.failed = 1;
        break;
    }
    case ADAG_STEP_CONNECT: {
        adag_msg_connect_t m = {run->id, {da->peers.data, da->peers.len}};
        adag__msg_encode_connect(&wb, &m);
        break;
    }
    case ADAG_STEP_START:
    case ADAG_STEP_STOP: {
        /* STOP's drop: the communicators the worker drops */
        adag_msg_dag_t m = {run->id, ADAG_OK,
                            step == ADAG_STEP_STOP ? da->comm_drop : 0};
        adag__msg_encode_dag(&wb, &m);
        break;
    }
    }
    if (st == ADAG_OK)
        st = request_send(a, step_msg[step], &wb, fds, nfds);
    if (st == ADAG_OK && step == ADAG_STEP_PREPARE)
        da->prepared = 1;
    adag__wbuf_free(&wb);
    adag__wbuf_free(&prog);
    adag__wbuf_free(&domains);
    *pending = st == ADAG_OK;
    return st;
}

static int process_step_fd(adag_actor_h a)
{
    return proc_of(a)->ctl;
}

static adag_status_t process_step_end(adag_actor_h a, adag_dag_run_t *run, unsigned ai,
                                      adag_step_t step, int64_t deadline)
{
    adag_ctl_msg_t reply;
    adag_blob_t body = {NULL, 0};
    adag_status_t st = request_recv(a, step_msg[step], deadline, &reply, &body);
    if (st != ADAG_OK)
        return st;
    if (step == ADAG_STEP_PREPARE) {
        adag_dag_actor_t *da = &run->actors[ai];
        adag__wbuf_free(&da->infos);
        adag__wbuf_raw(&da->infos, body.data, body.len);
        if (da->infos.failed)
            st = adag__error(ADAG_ERR_NO_MEMORY, "actor %s: out of memory", a->name);
    } else if (body.len) {
        st = adag__error(ADAG_ERR_PROTOCOL, "actor %s: unexpected %zu bytes answering %s", a->name,
                        body.len, adag__msg_info(step_msg[step])->name);
    }
    adag__ctl_msg_free(&reply);
    return st;
}

static void process_abort_dag(adag_actor_h a, adag_dag_run_t *run, adag_status_t status)
{
    process_actor_t *p = proc_of(a);
    adag_msg_dag_t m = {run->id, status, 0};
    adag_wbuf_t wb = {0};
    adag__msg_encode_dag(&wb, &m);
    /* Sent only when the socket has room, so this never blocks (the frame
     * is small enough to go whole); without room (the worker stopped
     * reading) it is dropped and STOP_DAG at teardown stops the loop. */
    if (!wb.failed && p->ctl >= 0) {
        pthread_mutex_lock(&p->send_lock);
        (void)adag__ctl_send_nowait(p->ctl, ADAG_MSG_ABORT_DAG, wb.data, wb.len);
        pthread_mutex_unlock(&p->send_lock);
    }
    adag__wbuf_free(&wb);
}

/* ---- life ---- */

static void process_kill(adag_actor_h a, const char *why)
{
    process_actor_t *p = proc_of(a);
    if (!p)
        return;
    pthread_mutex_lock(&a->rt->lock);
    if (!a->dead)
        adag__actor_mark_dead_locked(a, "actor %s (pid %d) was killed: %s", a->name, p->pid, why);
    int reaped = a->reaped || (p->pidfd < 0 && !p->remote);
    pthread_mutex_unlock(&a->rt->lock);
    if (reaped)
        return;
    if (p->remote)
        adag__remote_kill(p->remote); /* its worker reads EOF and exits */
    else
        adag__pidfd_kill(p->pidfd, SIGKILL);
    if (!adag__actor_wait_reaped(a, adag__deadline_ms(5000)))
        ADAG_LOG_ERROR("actor %s (pid %d) was not reaped after SIGKILL", a->name, p->pid);
}

/* SHUTDOWN (fini runs there), then kill what does not end in time. */
static void process_stop(adag_actor_h a)
{
    int64_t deadline = adag__deadline_ms(a->rt->settings.teardown_timeout_ms);
    if (proc_of(a)->ctl >= 0) {
        adag_status_t st = request(a, ADAG_MSG_SHUTDOWN, NULL, deadline, NULL, NULL);
        if (st == ADAG_OK && adag__actor_wait_reaped(a, deadline))
            return;
    }
    process_kill(a, "it did not shut down within ADAG_TEARDOWN_TIMEOUT_MS");
}

static int process_liveness_fd(adag_actor_h a)
{
    process_actor_t *p = proc_of(a);
    if (!p)
        return -1;
    return p->remote ? adag__remote_dead_fd(p->remote) : p->pidfd;
}

static int process_reap(adag_actor_h a, char *how, size_t len)
{
    process_actor_t *p = proc_of(a);
    if (p->remote)
        return adag__remote_reap(p->remote, how, len);
    return adag__reap(p->pidfd, 1, how, len);
}

/* What maps a worker's CLOCK_MONOTONIC to the driver's: 0 for a local
 * worker, or a remote one on this kernel (its boot id: another network
 * namespace); else the middle of the shortest of CLOCK_SAMPLES round trips
 * (common/trace.h). */
#define CLOCK_SAMPLES 8
static adag_status_t clock_offset(adag_actor_h a, int64_t begin, int64_t *offset_ns)
{
    int64_t samples[CLOCK_SAMPLES][3];
    *offset_ns = 0;
    if (!proc_of(a)->remote)
        return ADAG_OK;
    for (unsigned i = 0; i < CLOCK_SAMPLES; i++) {
        adag_wbuf_t wb = {0};
        adag_ctl_msg_t reply;
        adag_blob_t body;
        uint64_t now;
        char boot[ADAG_BOOT_ID_MAX];
        samples[i][0] = adag__now_ns();
        adag_status_t st = request_send(a, ADAG_MSG_CLOCK, &wb, NULL, 0);
        if (st == ADAG_OK)
            st = request_recv_by(a, ADAG_MSG_CLOCK, begin, control_deadline(a), &reply, &body);
        samples[i][2] = adag__now_ns();
        adag__wbuf_free(&wb);
        if (st != ADAG_OK)
            return st;
        st = adag__msg_decode_clock(body, &now, boot);
        adag__ctl_msg_free(&reply);
        if (st != ADAG_OK) {
            adag__error_prefix("actor %s", a->name);
            return st;
        }
        if (adag__boot_id()[0] && strcmp(boot, adag__boot_id()) == 0)
            return ADAG_OK;
        samples[i][1] = (int64_t)now;
    }
    *offset_ns = adag__clock_offset((const int64_t(*)[3])samples, CLOCK_SAMPLES);
    return ADAG_OK;
}

/* ---- observation (dag/proc/observe.c) ---- */

static const uint32_t ask_msg[] = {
    [ADAG_ASK_FIGURES] = ADAG_MSG_STATS_DAG,
    [ADAG_ASK_TRACE] = ADAG_MSG_TRACE_DAG,
};

/* Takes m by the deadline; 0 on success. */
static int lock_by(pthread_mutex_t *m, int64_t deadline)
{
    if (deadline == ADAG_FOREVER)
        return pthread_mutex_lock(m);
    struct timespec ts = adag__timespec_at(deadline);
    return pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &ts);
}

/* STATS_DAG or TRACE_DAG sent, ctl_lock held until ask_end or ask_cancel.
 * An actor that still owes the answer to an earlier request, which has
 * not begun to come, is not asked again (its requests would pile up in
 * its socket while it is stopped): it has not answered, at once. */
static adag_status_t process_ask_begin(adag_actor_h a, adag_dag_run_t *run, unsigned ai,
                                       adag_ask_t what, int64_t deadline, int *pending,
                                       adag_answer_t *out)
{
    process_actor_t *p = proc_of(a);
    (void)ai;
    (void)out;
    *pending = 0;
    if (lock_by(&p->ctl_lock, deadline) != 0)
        return adag__error(ADAG_ERR_TIMEOUT, "its control connection was busy with another "
                          "request all that time");
    if (p->owed && !frame_begins(p->ctl, 0)) {
        double s = (double)(adag__now_ns() - p->owed_since) / 1e9;
        pthread_mutex_unlock(&p->ctl_lock);
        return adag__error(ADAG_ERR_TIMEOUT, "its answer to a request of %.1f s ago has not come",
                          s);
    }
    adag_wbuf_t wb = {0};
    adag__msg_encode_dag(&wb, &(adag_msg_dag_t){.dag_id = run->id});
    adag_status_t st = request_send(a, ask_msg[what], &wb, NULL, 0);
    adag__wbuf_free(&wb);
    if (st != ADAG_OK) {
        pthread_mutex_unlock(&p->ctl_lock);
        return st;
    }
    *pending = 1;
    return ADAG_OK;
}

/* The control socket polled readable: answers owed to earlier requests
 * are dropped (then ours must begin by the deadline), ours is read whole. */
static adag_status_t process_ask_end(adag_actor_h a, adag_dag_run_t *run, unsigned ai,
                                     adag_ask_t what, int64_t deadline, adag_answer_t *out)
{
    process_actor_t *p = proc_of(a);
    adag_ctl_msg_t reply;
    adag_blob_t body;
    uint64_t worker_now;
    (void)run;
    (void)ai;
    adag_status_t st =
        request_recv_by(a, ask_msg[what], deadline, control_deadline(a), &reply, &body);
    if (st == ADAG_ERR_TIMEOUT) /* owed now; dag/proc/observe.c says how long it waited */
        st = adag__error(ADAG_ERR_TIMEOUT, "%s", "");
    if (st != ADAG_OK)
        goto out;
    if (what == ADAG_ASK_FIGURES)
        st = adag__msg_decode_figures(body, &out->figures);
    else
        st = adag__msg_decode_trace(body, &worker_now, &out->lost, &out->recs, &out->nrecs);
    adag__ctl_msg_free(&reply);
    if (st != ADAG_OK)
        adag__error_prefix("actor %s", a->name);
    else if (what == ADAG_ASK_TRACE)
        st = clock_offset(a, deadline, &out->offset_ns);
out:
    pthread_mutex_unlock(&p->ctl_lock);
    return st;
}

static void process_ask_cancel(adag_actor_h a)
{
    process_actor_t *p = proc_of(a);
    if (p->owed++ == 0)
        p->owed_since = adag__now_ns();
    pthread_mutex_unlock(&p->ctl_lock);
}

static int process_pid(adag_actor_h a)
{
    return proc_of(a) ? proc_of(a)->pid : 0;
}

static int process_events_fd(adag_actor_h a)
{
    return proc_of(a) ? proc_of(a)->events : -1;
}

static void process_events_close(adag_actor_h a)
{
    process_actor_t *p = proc_of(a);
    if (p && p->events >= 0) {
        close(p->events);
        p->events = -1;
    }
}

static void process_free(adag_actor_h a)
{
    process_actor_t *p = proc_of(a);
    if (!p)
        return;
    process_events_close(a);
    if (p->ctl >= 0)
        close(p->ctl);
    adag__remote_close(p->remote);
    if (p->pidfd >= 0)
        close(p->pidfd);
    pthread_mutex_destroy(&p->ctl_lock);
    pthread_mutex_destroy(&p->send_lock);
    free(p);
    a->impl = NULL;
}

/* A remote actor (ADAG_PLACEMENT_REMOTE) uses this table too: its impl
 * holds a TCP link to an agent's worker (dag/proc/remote_link.h) whose relay is
 * its control socket, and the link's dead fd in place of a pidfd. */
const adag_placement_ops_t adag_placement_process = {
    .name = "process",
    .create = process_create,
    .lock = process_lock,
    .unlock = process_unlock,
    .step_begin = process_step_begin,
    .step_fd = process_step_fd,
    .step_end = process_step_end,
    .abort_dag = process_abort_dag,
    .stop = process_stop,
    .kill = process_kill,
    .liveness_fd = process_liveness_fd,
    .reap = process_reap,
    .events_fd = process_events_fd,
    .events_close = process_events_close,
    .pid = process_pid,
    .ask_begin = process_ask_begin,
    .ask_end = process_ask_end,
    .ask_cancel = process_ask_cancel,
    .free = process_free,
};
