#include "transport/protocol.h"

#include "common/error.h"
#include "common/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const adag_msg_info_t msg_table[ADAG_MSG_END] = {
    [ADAG_MSG_HELLO] = {"HELLO", "say hello", 0, 0},
    [ADAG_MSG_CREATE_ACTOR] = {"CREATE_ACTOR", "create the actor", 0, 1},
    [ADAG_MSG_PREPARE_DAG] = {"PREPARE_DAG", "prepare a DAG", 0, ADAG_CTL_MAX_FDS},
    [ADAG_MSG_CONNECT_DAG] = {"CONNECT_DAG", "connect a DAG", 0, 0},
    [ADAG_MSG_START_DAG] = {"START_DAG", "start a DAG", 0, 0},
    [ADAG_MSG_ABORT_DAG] = {"ABORT_DAG", "abort a DAG", 1, 0},
    [ADAG_MSG_STOP_DAG] = {"STOP_DAG", "stop a DAG", 0, 0},
    [ADAG_MSG_SHUTDOWN] = {"SHUTDOWN", "shut down", 0, 0},
    [ADAG_MSG_REPLY] = {"REPLY", "reply", 1, 0},
    [ADAG_MSG_DAG_FAILED] = {"DAG_FAILED", "report a failed DAG", 1, 0},
    [ADAG_MSG_TRACE_DAG] = {"TRACE_DAG", "copy a DAG's trace", 0, 0},
    [ADAG_MSG_STATS_DAG] = {"STATS_DAG", "read a DAG's figures", 0, 0},
    [ADAG_MSG_CLOCK] = {"CLOCK", "read its clock", 0, 0},
};

const adag_msg_info_t *adag__msg_info(uint32_t type)
{
    return type < ADAG_MSG_END && msg_table[type].name ? &msg_table[type] : NULL;
}

const char *adag__msg_name(uint32_t type, char *buf, size_t len)
{
    const adag_msg_info_t *info = adag__msg_info(type);
    if (info)
        return info->name;
    snprintf(buf, len, "message %u", type);
    return buf;
}

adag_status_t adag__msg_check(const adag_ctl_msg_t *msg)
{
    const adag_msg_info_t *info = adag__msg_info(msg->type);
    if (!info)
        return adag__error(ADAG_ERR_PROTOCOL, "unknown control message %u (%zu bytes)", msg->type,
                          msg->len);
    if (msg->nfds > info->max_fds)
        return adag__error(ADAG_ERR_PROTOCOL, "%s message carries %u fds, at most %u", info->name,
                          msg->nfds, info->max_fds);
    return ADAG_OK;
}

adag_status_t adag__msg_recv(int sock, int64_t deadline, adag_ctl_msg_t *msg)
{
    adag_status_t st = adag__ctl_recv(sock, deadline, msg);
    if (st == ADAG_OK && (st = adag__msg_check(msg)) != ADAG_OK)
        adag__ctl_msg_free(msg);
    return st;
}

/* ---- encoders ---- */

void adag__msg_encode_hello(adag_wbuf_t *b, const adag_msg_hello_t *m)
{
    adag__wbuf_u32(b, m->magic);
    adag__wbuf_u32(b, m->version);
    adag__wbuf_bytes(b, m->token.data, m->token.len);
}

void adag__msg_encode_hello_reply(adag_wbuf_t *b, const adag_msg_hello_reply_t *m)
{
    adag__wbuf_u32(b, m->version);
    adag__wbuf_u32(b, m->pid);
    adag__wbuf_u32(b, m->ncpus);
}

static void write_place(adag_wbuf_t *b, const adag_msg_place_t *p)
{
    static const adag_msg_place_t none = {.numa = -1};
    if (!p)
        p = &none;
    adag__wbuf_u32(b, p->flags);
    adag__wbuf_u32(b, (uint32_t)p->numa);
    adag__wbuf_str(b, p->cpus);
    adag__wbuf_str(b, p->nic);
    adag__wbuf_str(b, p->gpu);
    adag__wbuf_u32(b, p->nic_dist);
}

/* Bounded like every field: flags known, the node -1 or small, strings
 * within their buffers (adag__rbuf_str fails the buffer otherwise). */
static void read_place(adag_rbuf_t *rb, adag_msg_place_t *p)
{
    p->flags = adag__rbuf_u32(rb);
    p->numa = (int32_t)adag__rbuf_u32(rb);
    adag__rbuf_str(rb, p->cpus, sizeof(p->cpus));
    adag__rbuf_str(rb, p->nic, sizeof(p->nic));
    adag__rbuf_str(rb, p->gpu, sizeof(p->gpu));
    p->nic_dist = adag__rbuf_u32(rb);
    if ((p->flags & ~(uint32_t)ADAG_MSG_PLACE_ALL) || p->numa < -1 || p->numa > 4095 ||
        p->nic_dist > 8)
        rb->failed = 1;
}

void adag__msg_encode_create(adag_wbuf_t *b, const char *module, const char *class_name,
                            const char *actor, const char *device, adag_blob_t init,
                            const adag_msg_place_t *place, adag_blob_t settings)
{
    static const char none[4]; /* a count of 0 */
    adag__wbuf_str(b, module);
    adag__wbuf_str(b, class_name);
    adag__wbuf_str(b, actor);
    adag__wbuf_str(b, device ? device : "");
    adag__wbuf_bytes(b, init.data, init.len);
    write_place(b, place);
    if (settings.len)
        adag__wbuf_bytes(b, settings.data, settings.len);
    else
        adag__wbuf_bytes(b, none, sizeof(none));
}

typedef struct {
    adag_wbuf_t *b;
    uint32_t n;
} settings_out_t;

static void put_setting(void *ctx, const char *name, const char *value)
{
    settings_out_t *o = ctx;
    adag__wbuf_str(o->b, name);
    adag__wbuf_str(o->b, value);
    o->n++;
}

void adag__msg_encode_settings(adag_wbuf_t *b, const adag_settings_t *s)
{
    size_t at = b->len;
    adag__wbuf_u32(b, 0); /* the count, filled in below */
    settings_out_t o = {b, 0};
    adag__settings_each_sent(s, put_setting, &o);
    if (!b->failed) {
        uint32_t n = o.n;
        memcpy(b->data + at, &n, sizeof(n)); /* in adag__wbuf_u32's byte order */
    }
}

/* One {name, value} pair of a settings list: views into the list (not
 * NUL-terminated); the bounds of protocol.h. */
static int read_setting(adag_rbuf_t *rb, const char **name, size_t *nlen, const char **value,
                        size_t *vlen)
{
    *name = adag__rbuf_bytes(rb, nlen);
    *value = adag__rbuf_bytes(rb, vlen);
    if (rb->failed || *nlen == 0 || *nlen >= ADAG_SETTING_NAME_MAX ||
        *vlen > ADAG_SETTING_TEXT_MAX || memchr(*name, '\0', *nlen) ||
        (*vlen && memchr(*value, '\0', *vlen)))
        rb->failed = 1;
    return !rb->failed;
}

/* The settings list of CREATE_ACTOR: a view, its form checked. */
static adag_blob_t read_settings(adag_rbuf_t *rb)
{
    adag_blob_t b;
    b.data = adag__rbuf_bytes(rb, &b.len);
    adag_rbuf_t in = {b.data, b.len, 0, 0};
    uint32_t n = adag__rbuf_u32(&in);
    const char *name, *value;
    size_t nlen, vlen;
    if (n > ADAG_MSG_SETTINGS_MAX)
        in.failed = 1;
    for (uint32_t i = 0; i < n && read_setting(&in, &name, &nlen, &value, &vlen); i++) {
    }
    if (in.failed || in.pos != in.len)
        rb->failed = 1;
    return b;
}

adag_status_t adag__msg_apply_settings(adag_blob_t settings, adag_settings_t *s)
{
    adag_rbuf_t in = {settings.data, settings.len, 0, 0};
    uint32_t n = adag__rbuf_u32(&in);
    char name[ADAG_SETTING_NAME_MAX], *value = NULL;
    const char *np, *vp;
    size_t nlen, vlen;
    adag_status_t st = ADAG_OK;
    for (uint32_t i = 0; i < n && st == ADAG_OK; i++) {
        if (!read_setting(&in, &np, &nlen, &vp, &vlen)) /* decoded: cannot happen */
            return adag__error(ADAG_ERR_PROTOCOL, "malformed settings in CREATE_ACTOR");
        memcpy(name, np, nlen);
        name[nlen] = '\0';
        if (!(value = malloc(vlen + 1)))
            return adag__error(ADAG_ERR_NO_MEMORY, "CREATE_ACTOR: setting %s", name);
        if (vlen)
            memcpy(value, vp, vlen);
        value[vlen] = '\0';
        st = adag__settings_set(s, name, value, "CREATE_ACTOR");
        free(value);
        if (st == ADAG_ERR_INVALID || st == ADAG_ERR_NOT_FOUND)
            st = adag__error(ADAG_ERR_PROTOCOL, "the driver's settings: %s", adag_last_error());
    }
    return st;
}

void adag__msg_encode_methods(adag_wbuf_t *b, const adag_msg_method_t *m, unsigned n,
                             const adag_msg_place_t *place)
{
    adag__wbuf_u32(b, n);
    for (unsigned i = 0; i < n; i++) {
        adag__wbuf_str(b, m[i].name);
        adag__wbuf_u32(b, m[i].nargs);
        adag__wbuf_u32(b, m[i].nreturns);
    }
    write_place(b, place);
}

void adag__msg_encode_prepare(adag_wbuf_t *b, const adag_msg_prepare_t *m)
{
    adag__wbuf_u32(b, m->dag_id);
    adag__wbuf_bytes(b, m->program.data, m->program.len);
    adag__wbuf_bytes(b, m->domains.data, m->domains.len);
}

void adag__msg_encode_connect(adag_wbuf_t *b, const adag_msg_connect_t *m)
{
    adag__wbuf_u32(b, m->dag_id);
    adag__wbuf_bytes(b, m->peers.data, m->peers.len);
}

void adag__msg_encode_dag(adag_wbuf_t *b, const adag_msg_dag_t *m)
{
    adag__wbuf_u32(b, m->dag_id);
    adag__wbuf_u32(b, (uint32_t)m->status);
    adag__wbuf_u64(b, m->drop);
}

void adag__msg_encode_reply(adag_wbuf_t *b, adag_status_t status, const char *msg,
                           adag_blob_t body)
{
    adag__wbuf_u32(b, (uint32_t)status);
    adag__wbuf_str(b, status == ADAG_OK ? "" : msg);
    adag__wbuf_bytes(b, body.data, body.len);
}

void adag__msg_encode_failed(adag_wbuf_t *b, const adag_msg_failed_t *m)
{
    adag__wbuf_u32(b, m->dag_id);
    adag__wbuf_u32(b, (uint32_t)m->status);
    adag__wbuf_str(b, m->msg);
}

/* ---- decoders ---- */

static adag_rbuf_t reader(const adag_ctl_msg_t *msg)
{
    adag_rbuf_t rb = {msg->payload, msg->len, 0, 0};
    return rb;
}

/* The payload must be a `type` message read to its last byte. */
static adag_status_t finish(const adag_ctl_msg_t *msg, uint32_t type, const adag_rbuf_t *rb)
{
    char buf[32];
    if (msg->type != type)
        return adag__error(ADAG_ERR_PROTOCOL, "expected a %s message, got %s",
                          adag__msg_info(type)->name, adag__msg_name(msg->type, buf, sizeof(buf)));
    if (rb->failed || rb->pos != rb->len)
        return adag__error(ADAG_ERR_PROTOCOL, "malformed %s message (%zu bytes, read %zu)",
                          adag__msg_info(type)->name, rb->len, rb->pos);
    return ADAG_OK;
}

static adag_blob_t read_blob(adag_rbuf_t *rb)
{
    adag_blob_t b;
    b.data = adag__rbuf_bytes(rb, &b.len);
    return b;
}

adag_status_t adag__msg_decode_hello(const adag_ctl_msg_t *msg, adag_msg_hello_t *m)
{
    adag_rbuf_t rb = reader(msg);
    m->magic = adag__rbuf_u32(&rb);
    m->version = adag__rbuf_u32(&rb);
    m->token = read_blob(&rb);
    if (m->token.len > ADAG_TOKEN_MAX)
        rb.failed = 1;
    return finish(msg, ADAG_MSG_HELLO, &rb);
}

adag_status_t adag__msg_decode_create(const adag_ctl_msg_t *msg, adag_msg_create_t *m)
{
    adag_rbuf_t rb = reader(msg);
    adag__rbuf_str(&rb, m->module, sizeof(m->module));
    adag__rbuf_str(&rb, m->class_name, sizeof(m->class_name));
    adag__rbuf_str(&rb, m->actor, sizeof(m->actor));
    adag__rbuf_str(&rb, m->device, sizeof(m->device));
    m->init = read_blob(&rb);
    read_place(&rb, &m->place);
    m->settings = read_settings(&rb);
    return finish(msg, ADAG_MSG_CREATE_ACTOR, &rb);
}

adag_status_t adag__msg_decode_prepare(const adag_ctl_msg_t *msg, adag_msg_prepare_t *m)
{
    adag_rbuf_t rb = reader(msg);
    m->dag_id = adag__rbuf_u32(&rb);
    m->program = read_blob(&rb);
    m->domains = read_blob(&rb);
    return finish(msg, ADAG_MSG_PREPARE_DAG, &rb);
}

adag_status_t adag__msg_decode_connect(const adag_ctl_msg_t *msg, adag_msg_connect_t *m)
{
    adag_rbuf_t rb = reader(msg);
    m->dag_id = adag__rbuf_u32(&rb);
    m->peers = read_blob(&rb);
    return finish(msg, ADAG_MSG_CONNECT_DAG, &rb);
}

adag_status_t adag__msg_decode_dag(const adag_ctl_msg_t *msg, adag_msg_dag_t *m)
{
    adag_rbuf_t rb = reader(msg);
    char buf[32];
    m->dag_id = adag__rbuf_u32(&rb);
    m->status = (int32_t)adag__rbuf_u32(&rb);
    m->drop = adag__rbuf_u64(&rb);
    if (msg->type != ADAG_MSG_START_DAG && msg->type != ADAG_MSG_ABORT_DAG &&
        msg->type != ADAG_MSG_STOP_DAG && msg->type != ADAG_MSG_TRACE_DAG &&
        msg->type != ADAG_MSG_STATS_DAG)
        return adag__error(ADAG_ERR_PROTOCOL, "expected a DAG message, got %s",
                          adag__msg_name(msg->type, buf, sizeof(buf)));
    if (msg->type == ADAG_MSG_ABORT_DAG && (m->status >= 0 || m->status < ADAG_ERR_INTERNAL))
        rb.failed = 1;
    return finish(msg, msg->type, &rb);
}

adag_status_t adag__msg_decode_failed(const adag_ctl_msg_t *msg, adag_msg_failed_t *m)
{
    adag_rbuf_t rb = reader(msg);
    m->dag_id = adag__rbuf_u32(&rb);
    m->status = (int32_t)adag__rbuf_u32(&rb);
    adag__rbuf_str(&rb, m->msg, sizeof(m->msg));
    if (m->status >= 0 || m->status < ADAG_ERR_INTERNAL)
        rb.failed = 1;
    return finish(msg, ADAG_MSG_DAG_FAILED, &rb);
}

adag_status_t adag__msg_decode_reply(const adag_ctl_msg_t *msg, adag_msg_reply_t *m)
{
    adag_rbuf_t rb = reader(msg);
    m->status = (int32_t)adag__rbuf_u32(&rb);
    adag__rbuf_str(&rb, m->msg, sizeof(m->msg));
    m->body = read_blob(&rb);
    return finish(msg, ADAG_MSG_REPLY, &rb);
}

adag_status_t adag__msg_decode_hello_reply(adag_blob_t body, adag_msg_hello_reply_t *m)
{
    adag_rbuf_t rb = {body.data, body.len, 0, 0};
    m->version = adag__rbuf_u32(&rb);
    m->pid = adag__rbuf_u32(&rb);
    m->ncpus = adag__rbuf_u32(&rb);
    if (rb.failed || rb.pos != rb.len || m->ncpus == 0)
        return adag__error(ADAG_ERR_PROTOCOL, "malformed reply to HELLO (%zu bytes)", body.len);
    return ADAG_OK;
}

adag_status_t adag__msg_decode_methods(adag_blob_t body, adag_msg_method_t **out, unsigned *n,
                                      adag_msg_place_t *place)
{
    adag_rbuf_t rb = {body.data, body.len, 0, 0};
    uint32_t count = adag__rbuf_u32(&rb);
    adag_msg_method_t *m = NULL;
    /* each method takes at least 16 bytes: a count the body cannot hold is refused first */
    if (rb.failed || count == 0 || count > ADAG_MAX_METHODS || count > (rb.len - rb.pos) / 16)
        goto bad;
    if (!(m = calloc(count, sizeof(*m))))
        return adag__error(ADAG_ERR_NO_MEMORY, "method table of %u methods", count);
    for (uint32_t i = 0; i < count; i++) {
        adag__rbuf_str(&rb, m[i].name, sizeof(m[i].name));
        m[i].nargs = adag__rbuf_u32(&rb);
        m[i].nreturns = adag__rbuf_u32(&rb);
        /* the limits the worker checked (dag/exec/class.c), checked again: a peer's bytes */
        if (rb.failed || !adag__method_shape_ok(m[i].name, m[i].nargs, m[i].nreturns))
            goto bad;
    }
    read_place(&rb, place);
    if (rb.failed || rb.pos != rb.len)
        goto bad;
    *out = m;
    *n = count;
    return ADAG_OK;
bad:
    free(m);
    return adag__error(ADAG_ERR_PROTOCOL, "malformed method table in the reply to CREATE_ACTOR");
}

