/* Unit test (suite "worker_protocol"): a real adag-worker process spoken to
 * with the control protocol by hand. HELLO comes first and carries the
 * version; unknown and malformed messages are answered with
 * ADAG_ERR_PROTOCOL naming the message, and the worker goes on; a driver of
 * another version is refused and the worker leaves; a class's init that
 * fails says why in the reply to CREATE_ACTOR. */
#include "common/clock.h"
#include "transport/protocol.h"
#include "transport/spawn.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef ADAG_TEST_BUILD_DIR
#error "ADAG_TEST_BUILD_DIR must be defined by the build"
#endif
#ifndef ADAG_TEST_MODULE
#error "ADAG_TEST_MODULE must be defined by the build"
#endif

typedef struct {
    int pid, pidfd, sock;
} worker_t;

static worker_t spawn(void)
{
    worker_t w;
    cr_assert_eq(adag__spawn_worker(ADAG_TEST_BUILD_DIR "/adag-worker", &w.pid, &w.pidfd, &w.sock),
                 ADAG_OK, "%s", adag_last_error());
    return w;
}

/* Sends a frame and reads the REPLY: its status, message into msg, body
 * bytes into body (when given). */
static adag_status_t ask(worker_t *w, uint32_t type, const adag_wbuf_t *payload, char *msg,
                         size_t msg_len, adag_wbuf_t *body)
{
    adag_ctl_msg_t reply;
    adag_msg_reply_t r;
    cr_assert_eq(adag__ctl_send(w->sock, type, payload ? payload->data : NULL,
                               payload ? payload->len : 0, NULL, 0),
                 ADAG_OK);
    cr_assert_eq(adag__msg_recv(w->sock, adag__deadline_ms(10000), &reply), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(adag__msg_decode_reply(&reply, &r), ADAG_OK, "%s", adag_last_error());
    snprintf(msg, msg_len, "%s", r.msg);
    if (body)
        adag__wbuf_raw(body, r.body.data, r.body.len);
    adag__ctl_msg_free(&reply);
    return r.status;
}

static adag_status_t hello(worker_t *w, uint32_t version, char *msg, size_t len,
                           adag_wbuf_t *body)
{
    adag_wbuf_t wb = {0};
    adag_msg_hello_t h = {ADAG_PROTOCOL_MAGIC, version, {"tok", 3}};
    adag__msg_encode_hello(&wb, &h);
    adag_status_t st = ask(w, ADAG_MSG_HELLO, &wb, msg, len, body);
    adag__wbuf_free(&wb);
    return st;
}

/* Waits for the worker to exit; returns its wait status. */
static int exit_status(worker_t *w)
{
    int status = 0;
    for (int i = 0; i < 500; i++) {
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r == w->pid) {
            close(w->sock);
            close(w->pidfd);
            return status;
        }
        usleep(10000);
    }
    kill(w->pid, SIGKILL);
    waitpid(w->pid, &status, 0);
    cr_assert_fail("worker %d did not exit within 5 s", w->pid);
    return -1;
}

static void shutdown_ok(worker_t *w)
{
    char msg[256];
    cr_assert_eq(ask(w, ADAG_MSG_SHUTDOWN, NULL, msg, sizeof msg, NULL), ADAG_OK, "%s", msg);
    int status = exit_status(w);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
}

Test(worker_protocol, hello_first, .timeout = 30)
{
    worker_t w = spawn();
    char msg[256];
    adag_wbuf_t wb = {0};
    adag_msg_dag_t m = {1, 0, 0};
    adag__msg_encode_dag(&wb, &m);
    cr_assert_eq(ask(&w, ADAG_MSG_START_DAG, &wb, msg, sizeof msg, NULL), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(msg, "first message must be HELLO, not START_DAG"), "message: %s", msg);
    adag__wbuf_free(&wb);
    int status = exit_status(&w);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 4, "status 0x%x", status);
}

Test(worker_protocol, other_version_refused, .timeout = 30)
{
    worker_t w = spawn();
    char msg[256];
    cr_assert_eq(hello(&w, ADAG_PROTOCOL_VERSION + 7, msg, sizeof msg, NULL), ADAG_ERR_PROTOCOL);
    char want[64];
    snprintf(want, sizeof want, "protocol %u", ADAG_PROTOCOL_VERSION + 7);
    cr_assert(strstr(msg, want) && strstr(msg, "this worker"), "message: %s", msg);
    int status = exit_status(&w);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 4, "status 0x%x", status);
}

Test(worker_protocol, hello_answers_version_pid_cpus, .timeout = 30)
{
    worker_t w = spawn();
    char msg[256];
    adag_wbuf_t body = {0};
    cr_assert_eq(hello(&w, ADAG_PROTOCOL_VERSION, msg, sizeof msg, &body), ADAG_OK, "%s", msg);
    adag_msg_hello_reply_t r;
    cr_assert_eq(adag__msg_decode_hello_reply((adag_blob_t){body.data, body.len}, &r), ADAG_OK);
    cr_assert_eq(r.version, ADAG_PROTOCOL_VERSION);
    cr_assert_eq((int)r.pid, w.pid);
    cr_assert_geq(r.ncpus, 1);
    adag__wbuf_free(&body);
    /* a second HELLO is a protocol error, not the end */
    cr_assert_eq(hello(&w, ADAG_PROTOCOL_VERSION, msg, sizeof msg, NULL), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(msg, "HELLO was already received"), "message: %s", msg);
    shutdown_ok(&w);
}

Test(worker_protocol, unknown_and_malformed_answered, .timeout = 30)
{
    worker_t w = spawn();
    char msg[256];
    cr_assert_eq(hello(&w, ADAG_PROTOCOL_VERSION, msg, sizeof msg, NULL), ADAG_OK, "%s", msg);
    /* an unknown type */
    adag_wbuf_t junk = {0};
    adag__wbuf_u32(&junk, 5);
    cr_assert_eq(ask(&w, 77, &junk, msg, sizeof msg, NULL), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(msg, "unknown control message 77"), "message: %s", msg);
    /* a truncated CREATE_ACTOR */
    cr_assert_eq(ask(&w, ADAG_MSG_CREATE_ACTOR, &junk, msg, sizeof msg, NULL), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(msg, "malformed CREATE_ACTOR message"), "message: %s", msg);
    /* PREPARE before the actor exists */
    adag_msg_prepare_t p = {3, {NULL, 0}, {NULL, 0}};
    adag_wbuf_t wb = {0};
    adag__msg_encode_prepare(&wb, &p);
    cr_assert_eq(ask(&w, ADAG_MSG_PREPARE_DAG, &wb, msg, sizeof msg, NULL), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(msg, "PREPARE_DAG before CREATE_ACTOR"), "message: %s", msg);
    adag__wbuf_free(&wb);
    /* a REPLY sent to a worker */
    cr_assert_eq(ask(&w, ADAG_MSG_REPLY, &junk, msg, sizeof msg, NULL), ADAG_ERR_PROTOCOL);
    cr_assert(strstr(msg, "REPLY"), "message: %s", msg);
    adag__wbuf_free(&junk);
    /* ABORT_DAG is one-way: nothing answers it, even for a DAG that is not there */
    adag_msg_dag_t a = {42, ADAG_ERR_CLOSED, 0};
    adag__msg_encode_dag(&wb, &a);
    cr_assert_eq(adag__ctl_send(w.sock, ADAG_MSG_ABORT_DAG, wb.data, wb.len, NULL, 0), ADAG_OK);
    adag__wbuf_free(&wb);
    /* STOP_DAG of a DAG that is not there: the next answer is its own */
    adag_msg_dag_t s = {42, 0, 0};
    adag__msg_encode_dag(&wb, &s);
    cr_assert_eq(ask(&w, ADAG_MSG_STOP_DAG, &wb, msg, sizeof msg, NULL), ADAG_ERR_NOT_FOUND);
    cr_assert(strstr(msg, "no DAG 42"), "message: %s", msg);
    adag__wbuf_free(&wb);
    shutdown_ok(&w);
}

/* CREATE_ACTOR of a class whose init fails with a message (adag_init_fail):
 * the REPLY carries it (the driver names the actor), bounded so that it
 * fits the reply's message (ADAG_ERROR_MAX); the worker then takes another
 * CREATE_ACTOR. */
Test(worker_protocol, init_failure_message_in_the_reply, .timeout = 30)
{
    worker_t w = spawn();
    char msg[ADAG_ERROR_MAX];
    cr_assert_eq(hello(&w, ADAG_PROTOCOL_VERSION, msg, sizeof msg, NULL), ADAG_OK, "%s", msg);
    adag_wbuf_t wb = {0};
    adag__msg_encode_create(&wb, ADAG_TEST_MODULE, "refusing", "r", NULL,
                           (adag_blob_t){"/x.conf", 7}, NULL,
                           (adag_blob_t){NULL, 0});
    cr_assert_eq(ask(&w, ADAG_MSG_CREATE_ACTOR, &wb, msg, sizeof msg, NULL), ADAG_ERR_INVALID);
    cr_assert_str_eq(msg, "init of class refusing failed: cannot use config '/x.conf'");
    adag__wbuf_free(&wb);
    /* a message of 1003 bytes: its first 255 travel */
    adag__msg_encode_create(&wb, ADAG_TEST_MODULE, "refusing", "r", NULL, (adag_blob_t){"long", 4},
                           NULL, (adag_blob_t){NULL, 0});
    cr_assert_eq(ask(&w, ADAG_MSG_CREATE_ACTOR, &wb, msg, sizeof msg, NULL), ADAG_ERR_INVALID);
    const char *head = "init of class refusing failed: ";
    cr_assert(strncmp(msg, head, strlen(head)) == 0, "message: %s", msg);
    cr_assert_eq(strlen(msg), strlen(head) + 255, "message: %s", msg);
    cr_assert_eq(strspn(msg + strlen(head), "x"), 255);
    adag__wbuf_free(&wb);
    /* the worker goes on */
    adag__msg_encode_create(&wb, ADAG_TEST_MODULE, "counter", "c", NULL, (adag_blob_t){NULL, 0},
                           NULL, (adag_blob_t){NULL, 0});
    cr_assert_eq(ask(&w, ADAG_MSG_CREATE_ACTOR, &wb, msg, sizeof msg, NULL), ADAG_OK, "%s", msg);
    adag__wbuf_free(&wb);
    shutdown_ok(&w);
}
