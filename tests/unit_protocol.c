/*
 * The control protocol (suite "protocol", transport/protocol.c): every
 * message type of the table round-trips through its encoder and decoder,
 * every strict prefix (and a trailing byte) is ADAG_ERR_PROTOCOL naming the
 * message, bounds are enforced, and adag__msg_recv refuses unknown types and
 * fds a message may not carry, over a real socketpair. The replies that
 * observe a running DAG (trace records, clock, stats figures):
 * tests/unit_protocol_observe.c.
 */
#include "common/clock.h"
#include "common/error.h"
#include "common/settings.h"
#include "transport/protocol.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char init_bytes[] = {1, 2, 0, 3};
static const char program_bytes[] = "a program";
static const char domain_bytes[] = {0, 0, 0, 0, 9};
static const char peer_bytes[] = "peer info";
static const char body_bytes[] = {7, 7, 7};

/* Each case encodes a sample message, and decodes one (checking the fields
 * when check is set). */
typedef struct {
    uint32_t type;
    void (*encode)(adag_wbuf_t *b);
    adag_status_t (*decode)(const adag_ctl_msg_t *m, int check);
} msg_case_t;

static int blob_is(adag_blob_t b, const void *data, size_t len)
{
    return b.len == len && (len == 0 || memcmp(b.data, data, len) == 0);
}

static void enc_hello(adag_wbuf_t *b)
{
    adag_msg_hello_t m = {ADAG_PROTOCOL_MAGIC, ADAG_PROTOCOL_VERSION, {"token!", 6}};
    adag__msg_encode_hello(b, &m);
}

static adag_status_t dec_hello(const adag_ctl_msg_t *msg, int check)
{
    adag_msg_hello_t m;
    adag_status_t st = adag__msg_decode_hello(msg, &m);
    if (check && st == ADAG_OK)
        cr_assert(m.magic == ADAG_PROTOCOL_MAGIC && m.version == ADAG_PROTOCOL_VERSION &&
                  blob_is(m.token, "token!", 6));
    return st;
}

static const adag_msg_place_t place_req = {
    .flags = ADAG_MSG_PLACE_CPUS | ADAG_MSG_PLACE_NIC | ADAG_MSG_PLACE_AUTOMATIC,
    .numa = 1,
    .cpus = "0-3,8",
    .nic = "mlx5_2:1",
};

/* A runtime's settings with values of their own: two changed from the
 * defaults, and a string. */
static void sample_settings(adag_settings_t *s)
{
    cr_assert_eq(adag__settings_defaults(s), ADAG_OK);
    cr_assert_eq(adag__settings_set(s, "ADAG_SPIN_NS", "1234", "test"), ADAG_OK);
    cr_assert_eq(adag__settings_set(s, "ADAG_TEARDOWN_TIMEOUT_MS", "777", "test"), ADAG_OK);
    cr_assert_eq(adag__settings_set(s, "ADAG_HOSTS", "a=h:1,b=h:2", "test"), ADAG_OK);
    cr_assert_eq(adag__settings_set(s, "ADAG_TOKEN", "secret", "test"), ADAG_OK);
}

static void enc_create(adag_wbuf_t *b)
{
    adag_settings_t s;
    adag_wbuf_t set = {0};
    sample_settings(&s);
    adag__msg_encode_settings(&set, &s);
    adag__settings_free(&s);
    adag__msg_encode_create(b, "/lib/libx.so", "Stage", "stage1", "cuda:1",
                           (adag_blob_t){init_bytes, sizeof(init_bytes)}, &place_req,
                           (adag_blob_t){set.data, set.len});
    adag__wbuf_free(&set);
}

static adag_status_t dec_create(const adag_ctl_msg_t *msg, int check)
{
    adag_msg_create_t m;
    adag_status_t st = adag__msg_decode_create(msg, &m);
    if (check && st == ADAG_OK) {
        cr_assert_str_eq(m.module, "/lib/libx.so");
        cr_assert_str_eq(m.class_name, "Stage");
        cr_assert_str_eq(m.actor, "stage1");
        cr_assert_str_eq(m.device, "cuda:1");
        cr_assert(blob_is(m.init, init_bytes, sizeof(init_bytes)));
        cr_assert(m.place.flags == place_req.flags && m.place.numa == 1);
        cr_assert_str_eq(m.place.cpus, "0-3,8");
        cr_assert_str_eq(m.place.nic, "mlx5_2:1");
        /* the settings arrive whole, over defaults elsewhere; not the token */
        adag_settings_t got, want;
        cr_assert_eq(adag__settings_defaults(&got), ADAG_OK);
        cr_assert_eq(adag__msg_apply_settings(m.settings, &got), ADAG_OK, "%s",
                     adag_last_error());
        sample_settings(&want);
        cr_assert_eq(got.spin_ns, 1234);
        cr_assert_eq(got.teardown_timeout_ms, 777);
        cr_assert_str_eq(got.hosts, "a=h:1,b=h:2");
        cr_assert_null(got.token, "the secret token travelled to the worker");
        /* compared above; every other field (integers, NULL strings) byte for byte */
        free(want.token);
        free(want.hosts);
        free(got.hosts);
        want.token = want.hosts = got.hosts = NULL;
        cr_assert_eq(memcmp(&got, &want, sizeof(got)), 0, "a setting did not travel");
    }
    return st;
}

static void enc_prepare(adag_wbuf_t *b)
{
    adag_msg_prepare_t m = {41, {program_bytes, sizeof(program_bytes)},
                            {domain_bytes, sizeof(domain_bytes)}};
    adag__msg_encode_prepare(b, &m);
}

static adag_status_t dec_prepare(const adag_ctl_msg_t *msg, int check)
{
    adag_msg_prepare_t m;
    adag_status_t st = adag__msg_decode_prepare(msg, &m);
    if (check && st == ADAG_OK)
        cr_assert(m.dag_id == 41 && blob_is(m.program, program_bytes, sizeof(program_bytes)) &&
                  blob_is(m.domains, domain_bytes, sizeof(domain_bytes)));
    return st;
}

static void enc_connect(adag_wbuf_t *b)
{
    adag_msg_connect_t m = {42, {peer_bytes, sizeof(peer_bytes)}};
    adag__msg_encode_connect(b, &m);
}

static adag_status_t dec_connect(const adag_ctl_msg_t *msg, int check)
{
    adag_msg_connect_t m;
    adag_status_t st = adag__msg_decode_connect(msg, &m);
    if (check && st == ADAG_OK)
        cr_assert(m.dag_id == 42 && blob_is(m.peers, peer_bytes, sizeof(peer_bytes)));
    return st;
}

static void enc_dag_ok(adag_wbuf_t *b)
{
    adag_msg_dag_t m = {43, ADAG_OK, 0};
    adag__msg_encode_dag(b, &m);
}

static void enc_dag_abort(adag_wbuf_t *b)
{
    adag_msg_dag_t m = {43, ADAG_ERR_ACTOR_DIED, 0};
    adag__msg_encode_dag(b, &m);
}

static adag_status_t dec_dag(const adag_ctl_msg_t *msg, int check)
{
    adag_msg_dag_t m;
    adag_status_t st = adag__msg_decode_dag(msg, &m);
    if (check && st == ADAG_OK)
        cr_assert(m.dag_id == 43 &&
                  m.status == (msg->type == ADAG_MSG_ABORT_DAG ? ADAG_ERR_ACTOR_DIED : ADAG_OK));
    return st;
}

static void enc_reply(adag_wbuf_t *b)
{
    adag__msg_encode_reply(b, ADAG_ERR_METHOD, "actor a.m: boom",
                          (adag_blob_t){body_bytes, sizeof(body_bytes)});
}

static adag_status_t dec_reply(const adag_ctl_msg_t *msg, int check)
{
    adag_msg_reply_t m;
    adag_status_t st = adag__msg_decode_reply(msg, &m);
    if (check && st == ADAG_OK) {
        cr_assert_eq(m.status, ADAG_ERR_METHOD);
        cr_assert_str_eq(m.msg, "actor a.m: boom");
        cr_assert(blob_is(m.body, body_bytes, sizeof(body_bytes)));
    }
    return st;
}

static void enc_failed(adag_wbuf_t *b)
{
    adag_msg_failed_t m = {9, ADAG_ERR_TIMEOUT, "device channel x: the peer copy timed out"};
    adag__msg_encode_failed(b, &m);
}

static adag_status_t dec_failed(const adag_ctl_msg_t *msg, int check)
{
    adag_msg_failed_t m;
    adag_status_t st = adag__msg_decode_failed(msg, &m);
    if (check && st == ADAG_OK) {
        cr_assert_eq(m.dag_id, 9);
        cr_assert_eq(m.status, ADAG_ERR_TIMEOUT);
        cr_assert_str_eq(m.msg, "device channel x: the peer copy timed out");
    }
    return st;
}

/* Every type of the table, with its sample (SHUTDOWN carries nothing). */
static const msg_case_t cases[] = {
    {ADAG_MSG_HELLO, enc_hello, dec_hello},
    {ADAG_MSG_CREATE_ACTOR, enc_create, dec_create},
    {ADAG_MSG_PREPARE_DAG, enc_prepare, dec_prepare},
    {ADAG_MSG_CONNECT_DAG, enc_connect, dec_connect},
    {ADAG_MSG_START_DAG, enc_dag_ok, dec_dag},
    {ADAG_MSG_ABORT_DAG, enc_dag_abort, dec_dag},
    {ADAG_MSG_STOP_DAG, enc_dag_ok, dec_dag},
    {ADAG_MSG_SHUTDOWN, NULL, NULL},
    {ADAG_MSG_REPLY, enc_reply, dec_reply},
    {ADAG_MSG_DAG_FAILED, enc_failed, dec_failed},
    {ADAG_MSG_TRACE_DAG, enc_dag_ok, dec_dag},
    {ADAG_MSG_STATS_DAG, enc_dag_ok, dec_dag},
    {ADAG_MSG_CLOCK, NULL, NULL},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static adag_ctl_msg_t view(uint32_t type, const void *data, size_t len)
{
    adag_ctl_msg_t m;
    memset(&m, 0, sizeof(m));
    m.type = type;
    m.payload = (void *)data;
    m.len = len;
    return m;
}

static void assert_names(uint32_t type, const char *what)
{
    char want[96], buf[32];
    snprintf(want, sizeof(want), "%s %s message", what, adag__msg_name(type, buf, sizeof(buf)));
    cr_assert(strstr(adag_last_error(), want), "wanted \"%s\" in: %s", want, adag_last_error());
}

Test(protocol, every_type_has_a_case)
{
    for (uint32_t t = 0; t < ADAG_MSG_END + 8; t++) {
        const msg_case_t *c = NULL;
        for (unsigned i = 0; i < NCASES; i++)
            if (cases[i].type == t)
                c = &cases[i];
        cr_assert_eq(adag__msg_info(t) != NULL, c != NULL, "message type %u", t);
    }
    char buf[32];
    cr_assert_str_eq(adag__msg_name(ADAG_MSG_PREPARE_DAG, buf, sizeof(buf)), "PREPARE_DAG");
    cr_assert_str_eq(adag__msg_name(999, buf, sizeof(buf)), "message 999");
    cr_assert(adag__msg_info(ADAG_MSG_ABORT_DAG)->one_way &&
              adag__msg_info(ADAG_MSG_REPLY)->one_way);
    cr_assert(!adag__msg_info(ADAG_MSG_PREPARE_DAG)->one_way);
    cr_assert_eq(adag__msg_info(ADAG_MSG_PREPARE_DAG)->max_fds, ADAG_CTL_MAX_FDS);
    cr_assert(adag__msg_info(ADAG_MSG_DAG_FAILED)->one_way);
    cr_assert_eq(adag__msg_info(ADAG_MSG_CREATE_ACTOR)->max_fds, 1); /* the event socket */
}

/* DAG_FAILED carries an error status, never OK or a positive value. */
Test(protocol, dag_failed_needs_an_error_status)
{
    const int32_t bad[] = {ADAG_OK, 3, ADAG_ERR_INTERNAL - 1};
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        adag_msg_failed_t m = {1, bad[i], "x"}, out;
        adag_wbuf_t b = {0};
        adag__msg_encode_failed(&b, &m);
        adag_ctl_msg_t msg = view(ADAG_MSG_DAG_FAILED, b.data, b.len);
        cr_assert_eq(adag__msg_decode_failed(&msg, &out), ADAG_ERR_PROTOCOL, "status %d", bad[i]);
        adag__wbuf_free(&b);
    }
}

/* Round trip; every strict prefix and a trailing byte are refused with a
 * message that names the message; another type is refused too. */
Test(protocol, roundtrip_prefixes_and_trailing_bytes, .timeout = 30)
{
    for (unsigned i = 0; i < NCASES; i++) {
        const msg_case_t *c = &cases[i];
        if (!c->encode)
            continue;
        adag_wbuf_t b = {0};
        c->encode(&b);
        cr_assert(!b.failed);
        adag_ctl_msg_t m = view(c->type, b.data, b.len);
        cr_assert_eq(c->decode(&m, 1), ADAG_OK, "%s: %s", adag__msg_info(c->type)->name,
                     adag_last_error());
        for (size_t len = 0; len < b.len; len++) {
            m = view(c->type, b.data, len);
            cr_assert_eq(c->decode(&m, 0), ADAG_ERR_PROTOCOL, "%s: a %zu-byte prefix",
                         adag__msg_info(c->type)->name, len);
            assert_names(c->type, "malformed");
        }
        char *more = malloc(b.len + 1);
        memcpy(more, b.data, b.len);
        more[b.len] = 0;
        m = view(c->type, more, b.len + 1);
        cr_assert_eq(c->decode(&m, 0), ADAG_ERR_PROTOCOL, "%s: a trailing byte",
                     adag__msg_info(c->type)->name);
        assert_names(c->type, "malformed");
        free(more);
        /* the right bytes under another type */
        uint32_t other = c->type == ADAG_MSG_REPLY ? ADAG_MSG_HELLO : ADAG_MSG_REPLY;
        m = view(other, b.data, b.len);
        cr_assert_eq(c->decode(&m, 0), ADAG_ERR_PROTOCOL, "%s decoded a %s",
                     adag__msg_info(c->type)->name, adag__msg_info(other)->name);
        cr_assert(strstr(adag_last_error(), "expected a"), "%s", adag_last_error());
        adag__wbuf_free(&b);
    }
}

Test(protocol, abort_dag_needs_an_error_status)
{
    const int32_t bad[] = {ADAG_OK, 1, 12345, ADAG_ERR_INTERNAL - 1, INT32_MIN};
    const int32_t good[] = {ADAG_ERR_INVALID, ADAG_ERR_ACTOR_DIED, ADAG_ERR_INTERNAL};
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]) + 3; i++) {
        int is_bad = i < sizeof(bad) / sizeof(bad[0]);
        adag_msg_dag_t m = {1, is_bad ? bad[i] : good[i - sizeof(bad) / sizeof(bad[0])], 0}, out;
        adag_wbuf_t b = {0};
        adag__msg_encode_dag(&b, &m);
        adag_ctl_msg_t msg = view(ADAG_MSG_ABORT_DAG, b.data, b.len);
        cr_assert_eq(adag__msg_decode_dag(&msg, &out), is_bad ? ADAG_ERR_PROTOCOL : ADAG_OK,
                     "status %d", m.status);
        if (is_bad)
            assert_names(ADAG_MSG_ABORT_DAG, "malformed");
        else
            cr_assert_eq(out.status, m.status);
        adag__wbuf_free(&b);
    }
}

Test(protocol, bounds_are_enforced)
{
    adag_wbuf_t b = {0};
    adag_ctl_msg_t m;
    /* a token of ADAG_TOKEN_MAX bytes, and one more */
    char token[ADAG_TOKEN_MAX + 1];
    memset(token, 't', sizeof(token));
    for (size_t len = ADAG_TOKEN_MAX; len <= ADAG_TOKEN_MAX + 1; len++) {
        adag_msg_hello_t h = {ADAG_PROTOCOL_MAGIC, ADAG_PROTOCOL_VERSION, {token, len}}, out;
        adag__msg_encode_hello(&b, &h);
        m = view(ADAG_MSG_HELLO, b.data, b.len);
        cr_assert_eq(adag__msg_decode_hello(&m, &out),
                     len <= ADAG_TOKEN_MAX ? ADAG_OK : ADAG_ERR_PROTOCOL, "token of %zu", len);
        adag__wbuf_free(&b);
    }
    /* names longer than their arrays */
    char longname[PATH_MAX + 1];
    memset(longname, 'n', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    adag_msg_create_t c;
    for (int which = 0; which < 4; which++) {
        adag__msg_encode_create(&b, which == 0 ? longname : "m", which == 1 ? longname : "C",
                               which == 2 ? longname : "a", which == 3 ? longname : "emu:0",
                               (adag_blob_t){NULL, 0}, NULL, (adag_blob_t){NULL, 0});
        m = view(ADAG_MSG_CREATE_ACTOR, b.data, b.len);
        cr_assert_eq(adag__msg_decode_create(&m, &c), ADAG_ERR_PROTOCOL, "name %d", which);
        assert_names(ADAG_MSG_CREATE_ACTOR, "malformed");
        adag__wbuf_free(&b);
    }
    /* an actor without a device: NULL travels as "" */
    adag__msg_encode_create(&b, "m", "C", "a", NULL, (adag_blob_t){NULL, 0}, NULL,
                           (adag_blob_t){NULL, 0});
    m = view(ADAG_MSG_CREATE_ACTOR, b.data, b.len);
    cr_assert_eq(adag__msg_decode_create(&m, &c), ADAG_OK, "%s", adag_last_error());
    cr_assert_str_eq(c.device, "");
    cr_assert(c.place.flags == 0 && c.place.numa == -1 && !c.place.cpus[0]);
    adag__wbuf_free(&b);
    /* placements a peer may not send: unknown flags, a node below -1 or
     * past 4095, a distance past the table */
    adag_msg_place_t bad_places[4] = {place_req, place_req, place_req, place_req};
    bad_places[0].flags |= 1u << 20;
    bad_places[1].numa = -2;
    bad_places[2].numa = 4096;
    bad_places[3].nic_dist = 9;
    for (int i = 0; i < 4; i++) {
        adag__msg_encode_create(&b, "m", "C", "a", NULL, (adag_blob_t){NULL, 0}, &bad_places[i],
                               (adag_blob_t){NULL, 0});
        m = view(ADAG_MSG_CREATE_ACTOR, b.data, b.len);
        cr_assert_eq(adag__msg_decode_create(&m, &c), ADAG_ERR_PROTOCOL, "place %d", i);
        adag__wbuf_free(&b);
    }
    /* HELLO's reply: round trip, prefixes, no CPUs */
    adag_msg_hello_reply_t hr = {ADAG_PROTOCOL_VERSION, 1234, 8}, hout;
    adag__msg_encode_hello_reply(&b, &hr);
    cr_assert_eq(adag__msg_decode_hello_reply((adag_blob_t){b.data, b.len}, &hout), ADAG_OK);
    cr_assert(hout.version == hr.version && hout.pid == 1234 && hout.ncpus == 8);
    for (size_t len = 0; len < b.len; len++)
        cr_assert_eq(adag__msg_decode_hello_reply((adag_blob_t){b.data, len}, &hout),
                     ADAG_ERR_PROTOCOL);
    adag__wbuf_free(&b);
    hr.ncpus = 0;
    adag__msg_encode_hello_reply(&b, &hr);
    cr_assert_eq(adag__msg_decode_hello_reply((adag_blob_t){b.data, b.len}, &hout),
                 ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "malformed reply to HELLO"), "%s", adag_last_error());
    adag__wbuf_free(&b);
}

/* The last CREATE_ACTOR decode_with_settings encoded: what c's views
 * point into, until the next one. */
static adag_wbuf_t create_msg;

/* CREATE_ACTOR carrying a settings list `set` (pairs encoded by hand):
 * the status of its decoder. */
static adag_status_t decode_with_settings(const adag_wbuf_t *set, adag_msg_create_t *c)
{
    adag__wbuf_free(&create_msg);
    adag__msg_encode_create(&create_msg, "m", "C", "a", NULL, (adag_blob_t){NULL, 0}, NULL,
                           (adag_blob_t){set->data, set->len});
    adag_ctl_msg_t m = view(ADAG_MSG_CREATE_ACTOR, create_msg.data, create_msg.len);
    return adag__msg_decode_create(&m, c);
}

/* A list of n pairs {name, value} (values NULL: "1"), and what CREATE_ACTOR
 * with it decodes to. */
static adag_status_t settings_list(unsigned n, const char *const *names, const char *value,
                                   adag_wbuf_t *set, adag_msg_create_t *c)
{
    adag__wbuf_free(set);
    adag__wbuf_u32(set, n);
    for (unsigned i = 0; i < n; i++) {
        adag__wbuf_str(set, names[i]);
        adag__wbuf_str(set, value ? value : "1");
    }
    return decode_with_settings(set, c);
}

/* The settings list's form is bounded (count, name and value sizes, no
 * NUL, nothing after the last pair), and what it says is checked by the
 * settings table when the worker applies it: an unknown name, a refused
 * value or a process-wide setting is ADAG_ERR_PROTOCOL naming it. */
Test(protocol, create_actor_settings_are_bounded_and_checked)
{
    adag_wbuf_t set = {0};
    adag_msg_create_t c;
    static char many[ADAG_MSG_SETTINGS_MAX + 1][16];
    const char *names[ADAG_MSG_SETTINGS_MAX + 1];
    for (unsigned i = 0; i <= ADAG_MSG_SETTINGS_MAX; i++) {
        snprintf(many[i], sizeof(many[i]), "ADAG_X%u", i);
        names[i] = many[i];
    }
    cr_assert_eq(settings_list(ADAG_MSG_SETTINGS_MAX, names, NULL, &set, &c), ADAG_OK);
    cr_assert_eq(settings_list(ADAG_MSG_SETTINGS_MAX + 1, names, NULL, &set, &c),
                 ADAG_ERR_PROTOCOL, "one pair too many");
    /* names: 1 .. ADAG_SETTING_NAME_MAX - 1 bytes, no NUL */
    char name[ADAG_SETTING_NAME_MAX + 1];
    memset(name, 'N', sizeof(name));
    name[ADAG_SETTING_NAME_MAX - 1] = '\0';
    const char *one[1] = {name};
    cr_assert_eq(settings_list(1, one, NULL, &set, &c), ADAG_OK, "a name of %d bytes",
                 ADAG_SETTING_NAME_MAX - 1);
    name[ADAG_SETTING_NAME_MAX - 1] = 'N';
    name[ADAG_SETTING_NAME_MAX] = '\0';
    cr_assert_eq(settings_list(1, one, NULL, &set, &c), ADAG_ERR_PROTOCOL, "a long name");
    one[0] = "";
    cr_assert_eq(settings_list(1, one, NULL, &set, &c), ADAG_ERR_PROTOCOL, "an empty name");
    /* values: at most ADAG_SETTING_TEXT_MAX bytes ("" is one: the default) */
    one[0] = "ADAG_HOSTS";
    char *value = malloc(ADAG_SETTING_TEXT_MAX + 2);
    memset(value, 'v', ADAG_SETTING_TEXT_MAX + 1);
    value[ADAG_SETTING_TEXT_MAX] = '\0';
    cr_assert_eq(settings_list(1, one, value, &set, &c), ADAG_OK);
    value[ADAG_SETTING_TEXT_MAX] = 'v';
    value[ADAG_SETTING_TEXT_MAX + 1] = '\0';
    cr_assert_eq(settings_list(1, one, value, &set, &c), ADAG_ERR_PROTOCOL, "a long value");
    free(value);
    cr_assert_eq(settings_list(1, one, "", &set, &c), ADAG_OK);
    /* a NUL inside a name or a value; a byte after the last pair; no count */
    for (int which = 0; which < 2; which++) {
        adag__wbuf_free(&set);
        adag__wbuf_u32(&set, 1);
        adag__wbuf_bytes(&set, which ? "ADAG_HOSTS" : "ADAG\0X", which ? 10 : 6);
        adag__wbuf_bytes(&set, which ? "a\0b" : "1", which ? 3 : 1);
        cr_assert_eq(decode_with_settings(&set, &c), ADAG_ERR_PROTOCOL, "a NUL (%d)", which);
    }
    settings_list(1, one, "x", &set, &c);
    adag__wbuf_raw(&set, "", 1);
    cr_assert_eq(decode_with_settings(&set, &c), ADAG_ERR_PROTOCOL, "a byte after the pairs");
    adag__wbuf_free(&set);
    adag__wbuf_raw(&set, "\0\0\0", 3);
    cr_assert_eq(decode_with_settings(&set, &c), ADAG_ERR_PROTOCOL, "a count of 3 bytes");
    /* well formed, refused by the table when applied */
    static const struct {
        const char *name, *value, *says;
    } refused[] = {
        {"ADAG_NO_SUCH", "1", "there is no setting ADAG_NO_SUCH"},
        {"ADAG_SPIN_NS", "abc", "ADAG_SPIN_NS=abc: not an integer in [0, 1000000000]"},
        {"ADAG_TEARDOWN_TIMEOUT_MS", "-5", "ADAG_TEARDOWN_TIMEOUT_MS=-5: not an integer in [0, "},
        {"ADAG_LOG_LEVEL", "4", "ADAG_LOG_LEVEL is process-wide"},
    };
    for (unsigned i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        one[0] = refused[i].name;
        cr_assert_eq(settings_list(1, one, refused[i].value, &set, &c), ADAG_OK);
        adag_settings_t s;
        cr_assert_eq(adag__settings_defaults(&s), ADAG_OK);
        cr_assert_eq(adag__msg_apply_settings(c.settings, &s), ADAG_ERR_PROTOCOL, "%s=%s",
                     refused[i].name, refused[i].value);
        cr_assert(strstr(adag_last_error(), refused[i].says), "wanted \"%s\" in: %s",
                  refused[i].says, adag_last_error());
        adag__settings_free(&s);
    }
    adag__wbuf_free(&set);
    adag__wbuf_free(&create_msg);
}

/* A REPLY's message (a worker's failure, e.g. an init's adag_init_fail
 * text) travels whole up to ADAG_ERROR_MAX - 1 bytes; a longer one is no
 * REPLY a worker sends: refused. */
Test(protocol, reply_message_bound)
{
    char text[ADAG_ERROR_MAX + 1];
    for (size_t len = ADAG_ERROR_MAX - 1; len <= ADAG_ERROR_MAX; len++) {
        memset(text, 'm', len);
        text[len] = '\0';
        adag_wbuf_t b = {0};
        adag__msg_encode_reply(&b, ADAG_ERR_INVALID, text, (adag_blob_t){NULL, 0});
        adag_ctl_msg_t m = view(ADAG_MSG_REPLY, b.data, b.len);
        adag_msg_reply_t r;
        adag_status_t st = adag__msg_decode_reply(&m, &r);
        if (len < ADAG_ERROR_MAX) {
            cr_assert_eq(st, ADAG_OK, "%s", adag_last_error());
            cr_assert(r.status == ADAG_ERR_INVALID && strcmp(r.msg, text) == 0);
        } else {
            cr_assert_eq(st, ADAG_ERR_PROTOCOL, "a message of %zu bytes", len);
            assert_names(ADAG_MSG_REPLY, "malformed");
        }
        adag__wbuf_free(&b);
    }
}

Test(protocol, method_table)
{
    adag_msg_method_t ms[2] = {{"forward", 1, 1}, {"stats", 0, 2}}, *out;
    unsigned n;
    adag_wbuf_t b = {0};
    adag_msg_place_t placed = {.flags = ADAG_MSG_PLACE_BOUND | ADAG_MSG_PLACE_THIS_SYSTEM,
                               .numa = 0, .cpus = "1", .nic = "mlx5_0:1", .gpu = "0000:07:00.0",
                               .nic_dist = 1}, got;
    adag__msg_encode_methods(&b, ms, 2, &placed);
    cr_assert_eq(adag__msg_decode_methods((adag_blob_t){b.data, b.len}, &out, &n, &got), ADAG_OK);
    cr_assert_eq(n, 2);
    cr_assert(got.flags == placed.flags && got.numa == 0 && got.nic_dist == 1);
    cr_assert_str_eq(got.cpus, "1");
    cr_assert_str_eq(got.gpu, "0000:07:00.0");
    cr_assert_str_eq(out[1].name, "stats");
    cr_assert(out[0].nargs == 1 && out[1].nreturns == 2);
    free(out);
    for (size_t len = 0; len < b.len; len++)
        cr_assert_eq(adag__msg_decode_methods((adag_blob_t){b.data, len}, &out, &n, &got),
                     ADAG_ERR_PROTOCOL, "prefix %zu", len);
    adag__wbuf_free(&b);
    /* bad tables */
    adag_msg_method_t bad[] = {{"", 1, 1},
                               {"m", ADAG_MAX_ARGS + 1, 1},
                               {"m", 1, 0},
                               {"m", 1, ADAG_MAX_RETURNS + 1}};
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        adag__msg_encode_methods(&b, &bad[i], 1, NULL);
        cr_assert_eq(adag__msg_decode_methods((adag_blob_t){b.data, b.len}, &out, &n, &got),
                     ADAG_ERR_PROTOCOL, "method %u", i);
        cr_assert(strstr(adag_last_error(), "CREATE_ACTOR"), "%s", adag_last_error());
        adag__wbuf_free(&b);
    }
    /* 4096 methods, and one more */
    adag_msg_method_t *big = calloc(4097, sizeof(*big));
    for (unsigned i = 0; i < 4097; i++)
        big[i] = (adag_msg_method_t){"m", 1, 1};
    for (unsigned count = 4096; count <= 4097; count++) {
        adag__msg_encode_methods(&b, big, count, NULL);
        cr_assert_eq(adag__msg_decode_methods((adag_blob_t){b.data, b.len}, &out, &n, &got),
                     count <= 4096 ? ADAG_OK : ADAG_ERR_PROTOCOL, "%u methods", count);
        if (count <= 4096)
            free(out);
        adag__wbuf_free(&b);
    }
    free(big);
    /* counts: none, more than 4096, more than the body holds */
    const uint32_t counts[] = {0, 4097, 3, 0xffffffffu};
    for (unsigned i = 0; i < 4; i++) {
        adag__wbuf_u32(&b, counts[i]);
        adag__wbuf_str(&b, "m");
        adag__wbuf_u32(&b, 1);
        adag__wbuf_u32(&b, 1);
        cr_assert_eq(adag__msg_decode_methods((adag_blob_t){b.data, b.len}, &out, &n, &got),
                     ADAG_ERR_PROTOCOL, "count %u", counts[i]);
        adag__wbuf_free(&b);
    }
}

/* ---- adag__msg_recv over a socketpair ---- */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    cr_assert(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

Test(protocol, recv_refuses_unknown_types_and_fds, .timeout = 30)
{
    int sv[2], p[2];
    adag_ctl_msg_t msg;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(pipe(p), 0);
    int before = count_fds();

    /* every known type arrives as sent */
    for (unsigned i = 0; i < NCASES; i++) {
        adag_wbuf_t b = {0};
        if (cases[i].encode)
            cases[i].encode(&b);
        cr_assert_eq(adag__ctl_send(sv[0], cases[i].type, b.data, b.len, NULL, 0), ADAG_OK);
        cr_assert_eq(adag__msg_recv(sv[1], adag__deadline_ms(5000), &msg), ADAG_OK, "%s",
                     adag_last_error());
        cr_assert_eq(msg.type, cases[i].type);
        cr_assert(msg.len == b.len && (b.len == 0 || memcmp(msg.payload, b.data, b.len) == 0));
        if (cases[i].decode)
            cr_assert_eq(cases[i].decode(&msg, 1), ADAG_OK);
        adag__ctl_msg_free(&msg);
        adag__wbuf_free(&b);
    }

    /* unknown types (with an fd, which is closed), then a good frame still arrives */
    const uint32_t unknown[] = {0, ADAG_MSG_END, 999};
    for (unsigned i = 0; i < 3; i++) {
        cr_assert_eq(adag__ctl_send(sv[0], unknown[i], "xyz", 3, &p[0], 1), ADAG_OK);
        cr_assert_eq(adag__ctl_send(sv[0], ADAG_MSG_SHUTDOWN, NULL, 0, NULL, 0), ADAG_OK);
        cr_assert_eq(adag__msg_recv(sv[1], adag__deadline_ms(5000), &msg), ADAG_ERR_PROTOCOL,
                     "type %u", unknown[i]);
        cr_assert(strstr(adag_last_error(), "unknown control message"), "%s",
                  adag_last_error());
        cr_assert_eq(count_fds(), before, "the refused message's fd is open");
        cr_assert_eq(adag__msg_recv(sv[1], adag__deadline_ms(5000), &msg), ADAG_OK);
        cr_assert_eq(msg.type, ADAG_MSG_SHUTDOWN);
        adag__ctl_msg_free(&msg);
    }

    /* fds on a message that carries none; PREPARE_DAG may carry them all */
    adag_wbuf_t b = {0};
    enc_connect(&b);
    cr_assert_eq(adag__ctl_send(sv[0], ADAG_MSG_CONNECT_DAG, b.data, b.len, p, 2), ADAG_OK);
    cr_assert_eq(adag__msg_recv(sv[1], adag__deadline_ms(5000), &msg), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(adag_last_error(), "CONNECT_DAG message carries 2 fds, at most 0"), "%s",
              adag_last_error());
    cr_assert_eq(count_fds(), before);
    adag__wbuf_free(&b);
    int many[ADAG_CTL_MAX_FDS];
    for (unsigned i = 0; i < ADAG_CTL_MAX_FDS; i++)
        many[i] = p[i % 2];
    enc_prepare(&b);
    cr_assert_eq(adag__ctl_send(sv[0], ADAG_MSG_PREPARE_DAG, b.data, b.len, many,
                               ADAG_CTL_MAX_FDS),
                 ADAG_OK);
    cr_assert_eq(adag__msg_recv(sv[1], adag__deadline_ms(5000), &msg), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(msg.nfds, ADAG_CTL_MAX_FDS);
    cr_assert_eq(dec_prepare(&msg, 1), ADAG_OK);
    adag__ctl_msg_free(&msg);
    cr_assert_eq(count_fds(), before);
    adag__wbuf_free(&b);
    close(sv[0]);
    close(sv[1]);
    close(p[0]);
    close(p[1]);
}
