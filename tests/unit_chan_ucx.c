/*
 * What only the UCX channel (transport/chan_ucx.c) has to show beyond the
 * conformance suite (suite "chan"): endpoints in separate processes that
 * share no memory, over TCP only (as between hosts), with values from 0
 * bytes to past the rendezvous threshold checked byte by byte; progress
 * without any waiter (the domain's progress thread); an idle reader that
 * uses no CPU; a peer killed with SIGKILL failing the waits with a clear
 * error; a domain destroyed while a rendezvous to or from a stopped peer
 * is in flight; messages a peer should never send refused; and credits
 * riding with a value that goes the writer's way.
 */
#include "chan_rig.h"

#include "common/error.h"
#include "transport/ucx.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define UCX_LINE {CHAN_UCX, CAP_RING | CAP_ASYNC, "ucx", -1, -1}

/* Every test runs over TCP alone, as between two hosts. Criterion runs
 * each test in a process of its own, before anything made a UCP context. */
static void tcp_only(void)
{
    setenv("UCX_TLS", "tcp", 1);
}

/* ---- blobs over a socket: the control channel's part in a DAG ---- */

static void send_blob(int fd, const void *p, size_t len)
{
    uint32_t n = (uint32_t)len;
    cr_assert_eq(write(fd, &n, 4), 4);
    cr_assert_eq(write(fd, p, len), (ssize_t)len);
}

/* 0 on success (the child cannot use cr_assert) */
static int recv_blob(int fd, adag_wbuf_t *out)
{
    uint32_t n;
    char buf[ADAG_UCX_MAX_ADDR + 64];
    if (read(fd, &n, 4) != 4 || n > sizeof(buf))
        return -1;
    for (size_t got = 0; got < n;) {
        ssize_t k = read(fd, buf + got, n - got);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    adag__wbuf_raw(out, buf, n);
    return out->failed ? -1 : 0;
}

/* A channel with one reader, one endpoint here (`ep`: the writer, or the
 * reader when the child writes) and the other in a child process: the
 * domain exported and imported, peer info exchanged over a socket, both
 * connected, as PREPARE and CONNECT do. */
typedef struct {
    adag_dag_ctx_t ctx;
    adag_wbuf_t desc;
    adag_chan_geom_t geom;
    adag_chan_t *ep;
    int child_reads;
    pid_t child;
    int sock;
} pair_t;

static adag_chan_open_params_t ep_params(pair_t *p, adag_dag_ctx_t *ctx, int reader)
{
    return (adag_chan_open_params_t){.name = "remote.m[0]",
                                     .geom = p->geom,
                                     .reader = reader,
                                     .desc = {p->desc.data, p->desc.len},
                                     .abort = &ctx->abort,
                                     .policy = RIG_POLICY};
}

/* The child's end of the socket, for a body that talks to the parent. */
static int child_sock = -1;

/* The child: receive the descriptor and the domain, attach, open its
 * endpoint, connect, run body, exit with its code. */
static void child_main(pair_t *p, int sock, int (*body)(adag_chan_t *ep))
{
    child_sock = sock;
    adag_dag_ctx_t ctx;
    adag_chan_t *ep;
    adag_wbuf_t dom = {0}, info = {0}, other = {0};
    if (recv_blob(sock, &p->desc) || recv_blob(sock, &dom))
        _exit(19);
    adag__ctx_init(&ctx);
    if (adag__ctx_import_domains(&ctx, (adag_blob_t){dom.data, dom.len}, NULL, 0) != ADAG_OK)
        _exit(20);
    adag_chan_open_params_t op = ep_params(p, &ctx, p->child_reads ? 0 : -1);
    if (adag__ctx_open(&ctx, CHAN_UCX, &op, &info, &ep) != ADAG_OK)
        _exit(21);
    uint32_t n = (uint32_t)info.len;
    if (write(sock, &n, 4) != 4 || write(sock, info.data, info.len) != (ssize_t)info.len)
        _exit(22);
    if (recv_blob(sock, &other))
        _exit(23);
    adag_blob_t mine = {info.data, info.len}, theirs = {other.data, other.len};
    adag_blob_t peers[2] = {p->child_reads ? theirs : mine, p->child_reads ? mine : theirs};
    if (ep->ops->connect(ep, peers, 2) != ADAG_OK)
        _exit(24);
    int rc = body(ep);
    char done = 'd';
    if (write(sock, &done, 1) != 1) /* the parent's cue: this side is finished */
        rc = rc ? rc : 25;
    adag__ctx_destroy(&ctx);
    adag__wbuf_free(&dom);
    adag__wbuf_free(&info);
    adag__wbuf_free(&other);
    _exit(rc);
}

/* The child is forked before this process makes any UCX state (UCX's
 * threads do not survive fork; workers are exec'd, never forked). */
static void pair_open(pair_t *p, unsigned nslots, size_t capacity, int child_reads,
                      int (*body)(adag_chan_t *ep))
{
    memset(p, 0, sizeof(*p));
    p->child_reads = child_reads;
    tcp_only();
    p->geom = (adag_chan_geom_t){nslots, 1, capacity, 0, 0};
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    p->child = fork();
    cr_assert_geq(p->child, 0);
    if (p->child == 0) {
        close(sv[0]);
        child_main(p, sv[1], body);
    }
    close(sv[1]);
    p->sock = sv[0];
    adag__ctx_init(&p->ctx);
    uint32_t kind = CHAN_UCX;
    cr_assert_eq(adag__ctx_create_domains(&p->ctx, "remote", &kind, &p->geom, NULL, 1, &p->desc),
                 ADAG_OK, "%s", adag_last_error());
    adag_wbuf_t dom = {0};
    int fds[ADAG_CTL_MAX_FDS];
    unsigned nfds = 0;
    cr_assert_eq(adag__ctx_export_domains(&p->ctx, &dom, fds, &nfds, ADAG_CTL_MAX_FDS), ADAG_OK);
    cr_assert_eq(nfds, 0, "a UCX domain carries no fds across hosts");
    send_blob(p->sock, p->desc.data, p->desc.len);
    send_blob(p->sock, dom.data, dom.len);
    adag__wbuf_free(&dom);
    adag_wbuf_t info = {0}, other = {0};
    adag_chan_open_params_t op = ep_params(p, &p->ctx, child_reads ? -1 : 0);
    cr_assert_eq(adag__ctx_open(&p->ctx, CHAN_UCX, &op, &info, &p->ep), ADAG_OK, "%s",
                 adag_last_error());
    cr_assert_eq(recv_blob(p->sock, &other), 0, "the child sent no peer info");
    send_blob(p->sock, info.data, info.len);
    adag_blob_t mine = {info.data, info.len}, theirs = {other.data, other.len};
    adag_blob_t peers[2] = {child_reads ? mine : theirs, child_reads ? theirs : mine};
    cr_assert_eq(p->ep->ops->connect(p->ep, peers, 2), ADAG_OK, "%s", adag_last_error());
    adag__wbuf_free(&info);
    adag__wbuf_free(&other);
}

/* The child's exit code (after it said it was done, or died). */
static int pair_join(pair_t *p)
{
    int status;
    cr_assert_eq(waitpid(p->child, &status, 0), p->child);
    close(p->sock);
    adag__ctx_destroy(&p->ctx);
    adag__wbuf_free(&p->desc);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- values across processes ---- */

#define BIG (4u << 20)
static const size_t sizes[] = {0, 1, 8, 100, 4096, 65536, 300000, BIG - 1, BIG};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define ROUNDS 3

static int read_sizes(adag_chan_t *rd)
{
    for (uint64_t s = 0; s < ROUNDS * NSIZES; s++) {
        adag_slot_view_t v;
        if (adag__chan_wait(rd, s, adag__deadline_ms(20000), &v) != ADAG_OK)
            return 1;
        if (value_check(&v, s, sizes[s % NSIZES]))
            return 2;
        if ((uintptr_t)v.data % (uintptr_t)sysconf(_SC_PAGESIZE))
            return 4; /* slots of a page or more start on one */
        if (s % 7 == 3) /* hold some a while: the writer must not refill them */
            usleep(2000);
        if (value_check(&v, s, sizes[s % NSIZES]))
            return 3;
        adag__chan_release(rd, s);
    }
    return 0;
}

/* Every size, eager to rendezvous, arrives whole and in order in another
 * process over TCP, through 3 slots that wrap many times; slots of a page
 * or more start on a page on both sides (a copy into a slot 43 bytes past
 * its source's page offset ran at a third of its speed). */
Test(ucx, values_cross_processes_over_tcp, .timeout = 60)
{
    pair_t p;
    pair_open(&p, 3, BIG, 1, read_sizes);
    for (uint64_t s = 0; s < ROUNDS * NSIZES; s++) {
        void *buf;
        cr_assert_eq(adag__chan_acquire(p.ep, s, adag__deadline_ms(20000), &buf), ADAG_OK,
                     "seq %llu: %s", (unsigned long long)s, adag_last_error());
        cr_assert_eq((uintptr_t)buf % (uintptr_t)sysconf(_SC_PAGESIZE), 0,
                     "slot %llu of %u bytes at %p: not on a page",
                     (unsigned long long)(s % 3), BIG, buf);
        value_fill(buf, s, sizes[s % NSIZES]);
        cr_assert_eq(adag__chan_publish(p.ep, s, sizes[s % NSIZES], NULL, ADAG_OK, NULL), ADAG_OK);
    }
    char done;
    cr_assert_eq(read(p.sock, &done, 1), 1, "the reader process did not finish");
    cr_assert_eq(pair_join(&p), 0, "the reader process saw a wrong value (code above)");
}

/* ---- progress with nobody waiting ---- */

static int sleep_then_check(adag_chan_t *rd)
{
    adag_ucx_chan_t *c = (adag_ucx_chan_t *)rd;
    /* never calls into the channel until the value is there: only the
     * domain's progress thread can have received it */
    for (int i = 0; i < 4000; i++) {
        if (atomic_load(&c->written) > 0)
            break;
        usleep(1000);
    }
    if (atomic_load(&c->written) == 0)
        return 1;
    adag_slot_view_t v;
    if (adag__chan_wait(rd, 0, adag__deadline_ms(1000), &v) != ADAG_OK ||
        value_check(&v, 0, BIG))
        return 2;
    adag__chan_release(rd, 0);
    return 0;
}

/* A rendezvous-sized value lands while neither side's thread touches the
 * channel: both progress threads move it. */
Test(ucx, progress_without_waiters, .timeout = 60)
{
    pair_t p;
    pair_open(&p, 2, BIG, 1, sleep_then_check);
    void *buf;
    cr_assert_eq(adag__chan_acquire(p.ep, 0, adag__deadline_ms(5000), &buf), ADAG_OK);
    value_fill(buf, 0, BIG);
    cr_assert_eq(adag__chan_publish(p.ep, 0, BIG, NULL, ADAG_OK, NULL), ADAG_OK);
    char done;
    cr_assert_eq(read(p.sock, &done, 1), 1);
    cr_assert_eq(pair_join(&p), 0, "the value did not land without a waiter");
}

/* ---- idle ---- */

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static int idle_reader(adag_chan_t *rd)
{
    adag_slot_view_t v;
    double c0 = cpu_s();
    int64_t t0 = adag__now_ns();
    adag_status_t st = adag__chan_wait(rd, 0, adag__deadline_ms(600), &v);
    double wall = ms_since(t0) / 1000, cpu = cpu_s() - c0;
    if (st != ADAG_ERR_TIMEOUT)
        return 1;
    /* a busy-polling waiter or progress thread would use a whole core */
    if (cpu > 0.25 * wall) {
        fprintf(stderr, "idle reader used %.3f s of CPU in %.3f s\n", cpu, wall);
        return 2;
    }
    return 0;
}

/* A reader waiting with nothing to come sleeps, and so does its domain's
 * progress thread. */
Test(ucx, idle_wait_uses_no_cpu, .timeout = 60)
{
    pair_t p;
    pair_open(&p, 2, 64, 1, idle_reader);
    char done;
    cr_assert_eq(read(p.sock, &done, 1), 1);
    cr_assert_eq(pair_join(&p), 0, "the idle reader spun (see stderr)");
}

/* ---- a peer that dies ---- */

/* SIGKILLs the child, then waits for `seq` on this side (acquire for the
 * writer, wait for the reader): it must fail with ADAG_ERR_IO naming the
 * channel and the peer's failure, within 2 s. */
static void kill_child_then(pair_t *p, uint64_t seq)
{
    kill(p->child, SIGKILL);
    int64_t t0 = adag__now_ns();
    void *buf;
    adag_slot_view_t v;
    adag_status_t st = p->child_reads
                           ? adag__chan_acquire(p->ep, seq, adag__deadline_ms(20000), &buf)
                           : adag__chan_wait(p->ep, seq, adag__deadline_ms(20000), &v);
    double ms = ms_since(t0);
    cr_assert_eq(st, ADAG_ERR_IO, "after the %s died: %s", p->child_reads ? "reader" : "writer",
                 adag_status_str(st));
    cr_assert(strstr(adag_last_error(), "remote.m[0]") && strstr(adag_last_error(), "failed"),
              "message: %s", adag_last_error());
    cr_assert_lt(ms, 2000.0, "the failure took %.0f ms", ms);
    cr_assert_eq(pair_join(p), 128 + SIGKILL);
}

static int hold_forever(adag_chan_t *rd)
{
    adag_slot_view_t v;
    if (adag__chan_wait(rd, 0, adag__deadline_ms(20000), &v) != ADAG_OK)
        return 1;
    pause(); /* never releases: the writer's ring stays full */
    return 0;
}

/* The reader is killed while the writer waits for its credit: the wait
 * fails with ADAG_ERR_IO naming the channel and the peer's failure, well
 * before its deadline. */
Test(ucx, killed_reader_fails_the_writer, .timeout = 60)
{
    pair_t p;
    pair_open(&p, 1, 64, 1, hold_forever);
    cr_assert_eq(value_put(p.ep, 0, adag__deadline_ms(5000)), ADAG_OK);
    usleep(200000); /* the reader holds seq 0 */
    kill_child_then(&p, 1);
}

static int write_then_hang(adag_chan_t *w)
{
    if (value_put(w, 0, adag__deadline_ms(5000)) != ADAG_OK)
        return 1;
    pause(); /* until killed */
    return 0;
}

/* The writer's process is killed while the reader waits for the next
 * value: the wait fails with ADAG_ERR_IO naming the channel, within 2 s. */
Test(ucx, killed_writer_fails_the_reader, .timeout = 60)
{
    pair_t p;
    pair_open(&p, 2, 64, 0, write_then_hang);
    cr_assert_eq(value_get(p.ep, 0, adag__deadline_ms(5000)), 0);
    kill_child_then(&p, 1);
}

/* ---- a domain destroyed with a rendezvous in flight ---- */

/* A peer that stops answering (SIGSTOP: its TCP stays up, nothing resets,
 * as behind a cut link that UCX has not noticed yet) in the middle of a
 * rendezvous: the request waits on that peer. Destroying this side's
 * domain must end the request (UCX aborts the process when a worker goes
 * with one still on an endpoint) and return within its bound: 1 s for
 * what is in flight to finish, then the forced close (2 s at most). */
#define DESTROY_BOUND_MS (1000.0 + 2000.0 + 2000.0)

/* Whether the endpoint's request for seq 1 is in flight: the writer's
 * send, or the reader's receive (its slot header is written when the
 * value's request arrives; `written` moves when its bytes landed). */
static int seq1_in_flight(adag_ucx_chan_t *c)
{
    pthread_mutex_lock(&c->d->lock);
    int busy = c->base.reader < 0
                   ? atomic_load(&c->slot_sends[1]) > 0
                   : c->slots[1].seq == 1 && atomic_load(&c->written) == 1 &&
                         atomic_load(&c->pending) > 0;
    pthread_mutex_unlock(&c->d->lock);
    return busy;
}

/* The stopped child, killed by the test's fini should an assertion end the
 * test first (a stopped process would hold the test run's pipes open),
 * and by the kernel should the test's process die (a UCX abort). */
static pid_t stopped_child;

static void kill_stopped_child(void)
{
    if (stopped_child > 0)
        kill(stopped_child, SIGKILL);
}

/* A reader's receive started: it has a request that is not a credit
 * (without the domain's lock, which the progress thread holds for as
 * long as data streams in: atomics only). */
static int receiving(adag_ucx_chan_t *c)
{
    unsigned credits = atomic_load(&c->slot_credits[0]) + atomic_load(&c->slot_credits[1]);
    return atomic_load(&c->written) == 1 && atomic_load(&c->pending) > credits;
}

/* The reader waits (spinning: the writer is stopped the moment it shows)
 * until its receive of seq 1 started, and stops the writer. */
static void stop_peer_mid_rendezvous(pair_t *p)
{
    adag_ucx_chan_t *c = (adag_ucx_chan_t *)p->ep;
    int64_t deadline = adag__deadline_ms(10000);
    while (!receiving(c) && adag__now_ns() < deadline) {
    }
    kill(p->child, SIGSTOP);
    int status;
    cr_assert_eq(waitpid(p->child, &status, WUNTRACED), p->child);
    cr_assert(WIFSTOPPED(status), "the peer did not stop");
    cr_assert(seq1_in_flight(c), "the rendezvous of seq 1 did not start (written %llu, "
              "slot 1 holds execution %llu, %u requests)",
              (unsigned long long)atomic_load(&c->written), (unsigned long long)c->slots[1].seq,
              atomic_load(&c->pending));
}

static void destroy_while_stuck(pair_t *p)
{
    adag_ucx_chan_t *c = (adag_ucx_chan_t *)p->ep;
    usleep(100000); /* what could still move, moved */
    cr_assert(seq1_in_flight(c), "the rendezvous of seq 1 ended: its peer did not stop in time");
    int64_t t0 = adag__now_ns();
    adag__ctx_destroy(&p->ctx);
    double ms = ms_since(t0);
    cr_log_info("the domain went in %.0f ms with a rendezvous in flight", ms);
    cr_assert_lt(ms, DESTROY_BOUND_MS, "destroying the domain took %.0f ms", ms);
    kill(p->child, SIGKILL);
    int status;
    cr_assert_eq(waitpid(p->child, &status, 0), p->child);
    stopped_child = 0;
    close(p->sock);
    adag__wbuf_free(&p->desc);
}

/* The reader: takes seq 0 (the connections are up both ways), says so,
 * and stops itself before seq 1's request can come. */
static int take_one_then_stop(adag_chan_t *rd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (value_get(rd, 0, adag__deadline_ms(10000)) != 0)
        return 1;
    char ready = 'r';
    if (write(child_sock, &ready, 1) != 1)
        return 2;
    raise(SIGSTOP);
    return 0;
}

/* This side's send of a rendezvous value waits for a reader that stopped. */
Test(ucx, destroy_with_a_send_to_a_stopped_reader, .timeout = 60, .fini = kill_stopped_child)
{
    pair_t p;
    pair_open(&p, 2, BIG, 1, take_one_then_stop);
    stopped_child = p.child;
    cr_assert_eq(value_put(p.ep, 0, adag__deadline_ms(5000)), ADAG_OK);
    char ready;
    cr_assert_eq(read(p.sock, &ready, 1), 1, "the reader did not take seq 0");
    int status;
    cr_assert_eq(waitpid(p.child, &status, WUNTRACED), p.child);
    cr_assert(WIFSTOPPED(status), "the reader did not stop");
    void *buf;
    cr_assert_eq(adag__chan_acquire(p.ep, 1, adag__deadline_ms(5000), &buf), ADAG_OK);
    value_fill(buf, 1, BIG);
    cr_assert_eq(adag__chan_publish(p.ep, 1, BIG, NULL, ADAG_OK, NULL), ADAG_OK);
    cr_assert(seq1_in_flight((adag_ucx_chan_t *)p.ep), "the send of seq 1 finished at once");
    destroy_while_stuck(&p);
}

/* The writer: sends seq 0, waits for the reader's word that it arrived,
 * publishes a value of HUGE bytes and waits to be stopped: the reader
 * stops it as soon as its receive started, while most of the value is
 * still to come. */
#define HUGE (64u << 20)

static int send_huge_then_wait(adag_chan_t *w)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (value_put(w, 0, adag__deadline_ms(10000)) != ADAG_OK)
        return 1;
    char go;
    if (read(child_sock, &go, 1) != 1)
        return 2;
    void *buf;
    if (adag__chan_acquire(w, 1, adag__deadline_ms(10000), &buf) != ADAG_OK)
        return 3;
    value_fill(buf, 1, HUGE);
    if (adag__chan_publish(w, 1, HUGE, NULL, ADAG_OK, NULL) != ADAG_OK)
        return 4;
    for (;;)
        pause();
}

/* This side's receive of a rendezvous value waits for a writer that
 * stopped in the middle of it. */
Test(ucx, destroy_with_a_receive_from_a_stopped_writer, .timeout = 60,
     .fini = kill_stopped_child)
{
    pair_t p;
    pair_open(&p, 2, HUGE, 0, send_huge_then_wait);
    stopped_child = p.child;
    cr_assert_eq(value_get(p.ep, 0, adag__deadline_ms(5000)), 0);
    char go = 'g';
    cr_assert_eq(write(p.sock, &go, 1), 1);
    stop_peer_mid_rendezvous(&p);
    destroy_while_stuck(&p);
}

/* ---- what a peer must never send ---- */

/* Sends one AM over conn, as a broken peer would, and waits until it left. */
static void send_am(adag_ucx_domain_t *d, adag_ucx_conn_t *conn, unsigned id, const void *hdr,
                    size_t hlen, const void *data, size_t len)
{
    ucp_request_param_t p = {0};
    pthread_mutex_lock(&d->lock);
    void *req = ucp_am_send_nbx(conn->ep, id, hdr, hlen, data, len, &p);
    cr_assert(!UCS_PTR_IS_ERR(req));
    while (UCS_PTR_IS_PTR(req) && ucp_request_check_status(req) == UCS_INPROGRESS)
        ucp_worker_progress(d->worker);
    if (UCS_PTR_IS_PTR(req))
        ucp_request_free(req);
    pthread_mutex_unlock(&d->lock);
}

/* One AM from the rig's writer to reader 0. */
static void send_raw(rig_t *r, unsigned id, const void *hdr, size_t hlen, const void *data,
                     size_t len)
{
    adag_ucx_chan_t *w = (adag_ucx_chan_t *)r->w;
    send_am(w->d, w->to_reader[0], id, hdr, hlen, data, len);
}

/* The reader's next wait: the status it failed with, or ADAG_OK. */
static adag_status_t broken_by(adag_ucx_data_hdr_t h, size_t len, const char *want)
{
    static const chan_backend_t line = UCX_LINE;
    static char data[ADAG_SLOT_ERR_MAX + 64];
    rig_t r;
    rig_open(&r, &line, 2, 1, 64, 0);
    send_raw(&r, ADAG_UCX_AM_DATA, &h, sizeof(h), data, len);
    adag_slot_view_t v;
    adag_status_t st = adag__chan_wait(r.rd[0], h.seq, adag__deadline_ms(3000), &v);
    if (st != ADAG_OK && want)
        cr_assert(strstr(adag_last_error(), want) && strstr(adag_last_error(), "conf.m[0]"),
                  "message: %s", adag_last_error());
    rig_close(&r);
    return st;
}

/* A value larger than the slot, one whose header and data disagree, one
 * for a slot the reader still holds, too many dimensions: each fails the
 * endpoint with ADAG_ERR_PROTOCOL (nothing is written past the slot); a
 * message with a short header is dropped. A well-formed one is taken. */
Test(ucx, malformed_values_are_refused, .timeout = 60)
{
    adag_ucx_data_hdr_t ok = {.chan = 0, .reader = 0, .seq = 0, .size = 16, .status = ADAG_OK};
    cr_assert_eq(broken_by(ok, 16, NULL), ADAG_OK, "%s", adag_last_error());
    adag_ucx_data_hdr_t h = ok;
    h.size = 65;
    cr_assert_eq(broken_by(h, 65, "do not fit"), ADAG_ERR_PROTOCOL);
    h = ok;
    h.size = 8;
    cr_assert_eq(broken_by(h, 16, "header says 8"), ADAG_ERR_PROTOCOL);
    h = ok;
    h.seq = 2; /* 2 slots, nothing released: seq 2 would overwrite seq 0 */
    cr_assert_eq(broken_by(h, 16, "while the reader holds"), ADAG_ERR_PROTOCOL);
    h = ok;
    h.meta.ndim = ADAG_MAX_DIMS + 1;
    cr_assert_eq(broken_by(h, 16, "dims"), ADAG_ERR_PROTOCOL);
    h = ok;
    h.status = ADAG_ERR_METHOD;
    h.size = ADAG_SLOT_ERR_MAX;
    cr_assert_eq(broken_by(h, ADAG_SLOT_ERR_MAX, "do not fit"), ADAG_ERR_PROTOCOL);

    static const chan_backend_t line = UCX_LINE;
    rig_t r;
    rig_open(&r, &line, 2, 1, 64, 0);
    char shorthdr[8] = {0};
    send_raw(&r, ADAG_UCX_AM_DATA, shorthdr, sizeof(shorthdr), NULL, 0);
    adag_slot_view_t v;
    cr_assert_eq(adag__chan_wait(r.rd[0], 0, adag__deadline_ms(200), &v), ADAG_ERR_TIMEOUT);
    cr_assert_eq(value_put(r.w, 0, adag__deadline_ms(3000)), ADAG_OK);
    cr_assert_eq(value_get(r.rd[0], 0, adag__deadline_ms(3000)), 0, "the channel still works");
    rig_close(&r);
}

/* ---- credits riding with values ---- */

/* A value sent from the reader's process to the writer's (a channel the
 * other way; here one the writer's process has no endpoint of, so only
 * its credits count) carries the reader's credit: the writer's slot comes
 * back without a credit message. Carried credits out of bounds (more than
 * ADAG_UCX_MAX_CARRIED, a header length that does not match) drop the
 * whole message; one for a reader the channel does not have fails the
 * writer's endpoint. */
static void send_back(rig_t *r, const adag_ucx_data_hdr_t *h, const adag_ucx_credit_hdr_t *cr,
                      unsigned ncr, size_t hlen)
{
    adag_ucx_chan_t *rd = (adag_ucx_chan_t *)r->rd[0];
    char hdr[sizeof(adag_ucx_data_msg_t) + 2 * sizeof(adag_ucx_credit_hdr_t)];
    cr_assert_leq(hlen, sizeof(hdr));
    memcpy(hdr, h, sizeof(*h));
    memcpy(hdr + sizeof(*h), cr, ncr * sizeof(*cr));
    send_am(rd->d, rd->to_writer, ADAG_UCX_AM_DATA, hdr, hlen, NULL, 0);
}

Test(ucx, credits_ride_with_values, .timeout = 60)
{
    static const chan_backend_t line = UCX_LINE;
    rig_t r;
    void *buf;
    adag_slot_view_t v;
    rig_open(&r, &line, 1, 1, 64, 0);
    cr_assert_eq(value_put(r.w, 0, adag__deadline_ms(3000)), ADAG_OK);
    cr_assert_eq(adag__chan_wait(r.rd[0], 0, adag__deadline_ms(3000), &v), ADAG_OK);
    /* the reader holds seq 0 and sends nothing of its own */
    adag_ucx_data_hdr_t h = {.chan = 77, .reader = 0, .seq = 0, .size = 0, .status = ADAG_OK};
    adag_ucx_credit_hdr_t cr[ADAG_UCX_MAX_CARRIED + 1];
    for (unsigned i = 0; i <= ADAG_UCX_MAX_CARRIED; i++)
        cr[i] = (adag_ucx_credit_hdr_t){0, 0, 1};
    h.ncredits = ADAG_UCX_MAX_CARRIED + 1;
    send_back(&r, &h, cr, 0, sizeof(h)); /* too many: dropped */
    h.ncredits = 1;
    send_back(&r, &h, cr, 1, sizeof(h) + sizeof(cr[0]) + 4); /* length mismatch: dropped */
    cr_assert_eq(adag__chan_acquire(r.w, 1, adag__deadline_ms(200), &buf), ADAG_ERR_TIMEOUT,
                 "a malformed message's credit was taken");
    send_back(&r, &h, cr, 1, sizeof(h) + sizeof(cr[0]));
    cr_assert_eq(adag__chan_acquire(r.w, 1, adag__deadline_ms(3000), &buf), ADAG_OK,
                 "the carried credit did not free the slot: %s", adag_last_error());
    /* a credit from a reader the channel does not have */
    cr[0] = (adag_ucx_credit_hdr_t){0, 5, 2};
    send_back(&r, &h, cr, 1, sizeof(h) + sizeof(cr[0]));
    adag_status_t st = adag__chan_acquire(r.w, 2, adag__deadline_ms(3000), &buf);
    cr_assert_eq(st, ADAG_ERR_PROTOCOL, "%s", adag_status_str(st));
    cr_assert(strstr(adag_last_error(), "a credit from reader 5 of 1"), "message: %s",
              adag_last_error());
    rig_close(&r);
}
