#include "dag/worker.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/log.h"
#include "dag/class.h"
#include "dag/internal.h"
#include "transport/control.h"
#include "transport/shm_ring.h"
#include "transport/wire.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct worker_dag {
    struct worker_dag *next;
    uint32_t id;
    adag_shm_segment_t seg;
    int event_fd;
    adag_loop_t loop;
} worker_dag_t;

typedef struct {
    int ctl;
    void *module;
    const adag_class_def_t *def;
    void *state;
    char name[ADAG_MAX_NAME];
    adag_method_info_t *methods;
    unsigned nmethods;
    pthread_mutex_t call_lock;
    worker_dag_t *dags;
} worker_t;

static adag_status_t reply(worker_t *w, adag_status_t st, const char *msg, int with_methods)
{
    adag_wbuf_t wb = {0};
    adag_wbuf_u32(&wb, (uint32_t)st);
    adag_wbuf_str(&wb, st == ADAG_OK ? "" : msg);
    if (with_methods) {
        adag_wbuf_u32(&wb, w->nmethods);
        for (unsigned i = 0; i < w->nmethods; i++) {
            adag_wbuf_str(&wb, w->methods[i].name);
            adag_wbuf_u32(&wb, w->methods[i].nargs);
            adag_wbuf_u32(&wb, w->methods[i].nreturns);
        }
    }
    if (wb.failed) {
        adag_wbuf_free(&wb);
        return adag_error(ADAG_ERR_NO_MEMORY, "worker: reply");
    }
    st = adag_ctl_send(w->ctl, ADAG_MSG_REPLY, wb.data, wb.len, NULL, 0);
    adag_wbuf_free(&wb);
    return st;
}

static adag_status_t create_actor(worker_t *w, const adag_ctl_msg_t *msg)
{
    adag_rbuf_t rb = {msg->payload, msg->len, 0, 0};
    char module[PATH_MAX], class_name[ADAG_MAX_NAME], where[PATH_MAX + 16];
    size_t init_size;
    const void *init_data;
    void *handle = NULL, *state = NULL;
    const adag_class_def_t *def = NULL;
    adag_method_info_t *methods = NULL;
    int init_ran = 0;
    adag_status_t st;

    if (w->def)
        return adag_error(ADAG_ERR_PROTOCOL, "worker already hosts actor %s", w->name);
    adag_rbuf_str(&rb, module, sizeof(module));
    adag_rbuf_str(&rb, class_name, sizeof(class_name));
    adag_rbuf_str(&rb, w->name, sizeof(w->name));
    init_data = adag_rbuf_bytes(&rb, &init_size);
    if (rb.failed || rb.pos != rb.len)
        return adag_error(ADAG_ERR_PROTOCOL, "malformed CREATE_ACTOR message");

    /* load, check the ABI, find and validate the class: dag/class.c */
    if ((st = adag_module_load(module, class_name, &handle, &def)) != ADAG_OK)
        return st;
    snprintf(where, sizeof(where), "module %s", module);
    if ((st = adag_class_methods(def, where, &methods)) != ADAG_OK)
        goto fail;
    if (!(state = calloc(1, def->state_size ? def->state_size : 1))) {
        st = adag_error(ADAG_ERR_NO_MEMORY, "state of %zu bytes for class %s", def->state_size,
                        class_name);
        goto fail;
    }
    if (def->init) {
        init_ran = 1;
        st = def->init(state, init_data, init_size);
        if (st != ADAG_OK) {
            /* fini must not run on a failed init (w->def stays NULL) */
            st = adag_error(st == ADAG_ERR_NO_MEMORY ? st : ADAG_ERR_INVALID,
                            "init of class %s returned %s", class_name, adag_status_str(st));
            goto fail;
        }
    }
    w->module = handle;
    w->def = def;
    w->methods = methods;
    w->nmethods = def->nmethods;
    w->state = state;
    return ADAG_OK;
fail:
    free(state);
    free(methods);
    if (!init_ran) /* an init that ran may have left threads or handlers in the module */
        dlclose(handle);
    return st;
}

static void on_fatal(void *ctx, adag_status_t st, const char *msg)
{
    worker_t *w = ctx;
    ADAG_LOG_ERROR("actor %s: %s (%s); the worker exits", w->name, msg, adag_status_str(st));
    _exit(3);
}

static adag_status_t install_dag(worker_t *w, adag_ctl_msg_t *msg)
{
    adag_rbuf_t rb = {msg->payload, msg->len, 0, 0};
    adag_program_t prog;
    adag_status_t st;

    if (!w->def)
        return adag_error(ADAG_ERR_PROTOCOL, "INSTALL_DAG before CREATE_ACTOR");
    if (msg->nfds != 2)
        return adag_error(ADAG_ERR_PROTOCOL, "INSTALL_DAG carries %u fds, expected 2", msg->nfds);
    st = adag_program_decode(&rb, w->nmethods, &prog);
    if (st != ADAG_OK)
        return st;
    worker_dag_t *d = calloc(1, sizeof(*d));
    if (!d) {
        adag_program_free(&prog);
        return adag_error(ADAG_ERR_NO_MEMORY, "install DAG");
    }
    d->id = prog.dag_id;
    st = adag_shm_segment_map(&d->seg, msg->fds[0], prog.segment_size);
    msg->fds[0] = -1; /* owned by the segment now, even on failure */
    if (st != ADAG_OK)
        goto fail_free;
    adag_segment_hdr_t *hdr = d->seg.base;
    if (hdr->magic != ADAG_SEGMENT_MAGIC || hdr->size != prog.segment_size) {
        st = adag_error(ADAG_ERR_PROTOCOL, "DAG segment has a bad header");
        goto fail_seg;
    }
    d->event_fd = msg->fds[1];
    msg->fds[1] = -1;
    st = adag_loop_open(&d->loop, &prog, d->seg.base, w->state, &w->call_lock, w->methods,
                        w->nmethods, w->name, d->event_fd);
    if (st != ADAG_OK)
        goto fail_fd;
    d->loop.on_fatal = on_fatal;
    d->loop.fatal_ctx = w;
    st = adag_loop_start(&d->loop);
    if (st != ADAG_OK)
        goto fail_loop;
    d->next = w->dags;
    w->dags = d;
    return ADAG_OK;
fail_loop:
    adag_loop_close(&d->loop);
fail_fd:
    close(d->event_fd);
fail_seg:
    adag_shm_segment_destroy(&d->seg);
fail_free:
    adag_program_free(&prog);
    free(d);
    return st;
}

static void dag_stop(worker_dag_t *d)
{
    adag_segment_hdr_t *hdr = d->seg.base;
    uint32_t zero = 0;
    atomic_compare_exchange_strong(&hdr->abort, &zero, (uint32_t)-ADAG_ERR_CLOSED);
    adag_event_notify(&hdr->start_ev);
    for (uint32_t i = 0; i < d->loop.prog.nchans; i++)
        if (d->loop.prog.chans[i].kind == ADAG_CHAN_SHM)
            adag_shm_chan_wake_all((char *)d->seg.base + d->loop.prog.chans[i].offset);
    adag_loop_close(&d->loop);
    adag_shm_segment_destroy(&d->seg);
    close(d->event_fd);
    free(d);
}

static adag_status_t stop_dag(worker_t *w, const adag_ctl_msg_t *msg)
{
    adag_rbuf_t rb = {msg->payload, msg->len, 0, 0};
    uint32_t id = adag_rbuf_u32(&rb);
    if (rb.failed)
        return adag_error(ADAG_ERR_PROTOCOL, "malformed STOP_DAG message");
    for (worker_dag_t **p = &w->dags; *p; p = &(*p)->next) {
        if ((*p)->id == id) {
            worker_dag_t *d = *p;
            *p = d->next;
            dag_stop(d);
            return ADAG_OK;
        }
    }
    return adag_error(ADAG_ERR_NOT_FOUND, "no DAG %u is installed", id);
}

int adag_worker_main(int argc, char **argv)
{
    worker_t w;
    memset(&w, 0, sizeof(w));
    w.ctl = -1;
    pthread_mutex_init(&w.call_lock, NULL);
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--control-fd") == 0)
            w.ctl = atoi(argv[i + 1]);
    if (w.ctl < 0) {
        fprintf(stderr, "adag-worker hosts a process actor for libadag; it is started by the "
                        "runtime as: adag-worker --control-fd N\n");
        return 2;
    }
    snprintf(w.name, sizeof(w.name), "(worker %d)", (int)getpid());
    for (;;) {
        adag_ctl_msg_t msg;
        adag_status_t st = adag_ctl_recv(w.ctl, ADAG_FOREVER, &msg);
        if (st != ADAG_OK) {
            /* the driver is gone (or spoke nonsense): leave at once; the
             * kernel frees our mappings and the memfds die with the last user */
            if (st != ADAG_ERR_CLOSED)
                ADAG_LOG_ERROR("actor %s: control socket: %s", w.name, adag_last_error());
            _exit(st == ADAG_ERR_CLOSED ? 0 : 4);
        }
        int with_methods = 0, shutdown = 0;
        switch (msg.type) {
        case ADAG_MSG_CREATE_ACTOR:
            st = create_actor(&w, &msg);
            with_methods = st == ADAG_OK;
            break;
        case ADAG_MSG_INSTALL_DAG:
            st = install_dag(&w, &msg);
            break;
        case ADAG_MSG_STOP_DAG:
            st = stop_dag(&w, &msg);
            break;
        case ADAG_MSG_SHUTDOWN:
            while (w.dags) {
                worker_dag_t *d = w.dags;
                w.dags = d->next;
                dag_stop(d);
            }
            if (w.def && w.def->fini)
                w.def->fini(w.state);
            st = ADAG_OK;
            shutdown = 1;
            break;
        default:
            st = adag_error(ADAG_ERR_PROTOCOL, "unknown control message %u", msg.type);
        }
        adag_ctl_msg_free(&msg);
        if (reply(&w, st, adag_last_error(), with_methods) != ADAG_OK)
            _exit(0);
        if (shutdown)
            _exit(0);
    }
}
