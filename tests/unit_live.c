/* Unit tests (suite "live"): the live view (common/live.h) and `adag-info
 * attach` against it; each test works in its own /tmp/adag-live-XXXXXX
 * (XDG_RUNTIME_DIR points there), removed at the end. */
#include "common/live.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define INFO ADAG_TEST_BUILD_DIR "/adag-info"
#define TMO 3000 /* ms for one request in these tests */

static char tmp[64];

static void make_tmp(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/adag-live-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
    cr_assert_eq(setenv("XDG_RUNTIME_DIR", tmp, 1), 0);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(p);
}

/* after each test, passed or failed */
static void remove_tmp(void)
{
    if (tmp[0] && nftw(tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "cannot remove %s: %s\n", tmp, strerror(errno));
}

TestSuite(live, .fini = remove_tmp);

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The render callback: "view <n>" with n counting calls; fail: returns -1;
 * big: writes that many 'x' instead. */
typedef struct {
    atomic_int calls, fail;
    atomic_size_t big;
} view_t;

static int render(void *arg, FILE *out)
{
    view_t *v = arg;
    size_t big = atomic_load(&v->big); /* before calls counts this one */
    int n = atomic_fetch_add(&v->calls, 1) + 1;
    for (size_t i = 0; i < big; i++)
        fputc('x', out);
    if (!big)
        fprintf(out, "view %d\n", n);
    return atomic_load(&v->fail) ? -1 : 0;
}

static adag_live_t *open_live(const char *path, view_t *v)
{
    adag_live_t *l = NULL;
    cr_assert_eq(adag__live_open(path, render, v, &l), ADAG_OK, "adag__live_open(%s): %s",
                 path ? path : "NULL", adag_last_error());
    return l;
}

static int connect_to(const char *path)
{
    int fd = -1;
    cr_assert_eq(adag__live_connect(path, &fd), ADAG_OK, "%s", adag_last_error());
    return fd;
}

/* One request on fd: it must give status want, and then exactly the text
 * `s` (NULL: any) if want is ADAG_OK, else a message containing s. Returns
 * the text's size. */
static size_t expect(int fd, adag_status_t want, const char *s)
{
    char *text = NULL;
    size_t size = 0;
    FILE *m = open_memstream(&text, &size);
    adag_status_t st = adag__live_request(fd, m, TMO);
    fclose(m);
    cr_assert_eq(st, want, "request gave %d, not %d: %s", st, want, adag_last_error());
    if (want == ADAG_OK && s)
        cr_assert_str_eq(text, s);
    if (want != ADAG_OK) {
        cr_assert(strstr(adag_last_error(), s), "\"%s\" lacks \"%s\"", adag_last_error(), s);
        cr_assert_eq(size, 0, "nothing written on an error");
    }
    free(text);
    return size;
}

/* Reads fd until EOF (or a reset) within ms; returns the bytes read, -1 on
 * a timeout. */
static ssize_t read_to_eof(int fd, char *buf, size_t cap, int ms)
{
    size_t n = 0;
    for (;;) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, ms) != 1)
            return -1;
        ssize_t k = recv(fd, buf + n, cap - 1 - n, MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno == ECONNRESET))
            break;
        if (k < 0 && errno != EAGAIN)
            return -1;
        n += k > 0 ? (size_t)k : 0;
        cr_assert_lt(n, cap - 1, "more than %zu bytes", cap);
    }
    buf[n] = '\0';
    return (ssize_t)n;
}

/* Starts `adag-info <args> 2>&1`; finish() reads the rest of its output
 * (caller frees) and gives its exit status; run_info() does both. */
#define run_info(args, status) finish(start_info(args), (status))
static FILE *start_info(const char *args)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "timeout 10 %s %s 2>&1", INFO, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "popen %s", cmd);
    return p;
}

static char *finish(FILE *p, int *status)
{
    char *text = NULL;
    size_t size = 0, k;
    FILE *m = open_memstream(&text, &size);
    char chunk[4096];
    while ((k = fread(chunk, 1, sizeof(chunk), p)) > 0)
        fwrite(chunk, 1, k, m);
    fclose(m);
    int w = pclose(p);
    *status = WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
    return text;
}

#define ASSERT_HAS(text, needle) \
    cr_assert(strstr((text), (needle)), "output lacks \"%s\":\n%s", (needle), (text))

static void socket_file_at(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s: %s", path,
                 strerror(errno));
    close(s); /* no unlink: a stale socket file */
}

Test(live, dir, .timeout = 10)
{
    make_tmp();
    char dir[128], want[128], real[128];
    cr_assert_eq(adag__live_dir(dir, sizeof(dir)), ADAG_OK, "%s", adag_last_error());
    snprintf(want, sizeof(want), "%s/adag", tmp);
    cr_assert_str_eq(dir, want);
    struct stat st;
    cr_assert(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0700, "mode %o", st.st_mode & 07777);
    cr_assert_eq(adag__live_dir(dir, sizeof(dir)), ADAG_OK, "again: %s", adag_last_error());
    cr_assert_eq(adag__live_dir(dir, 8), ADAG_ERR_INVALID, "a buffer too small");

    chmod(want, 0750);
    cr_assert_eq(adag__live_dir(dir, sizeof(dir)), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), want) && strstr(adag_last_error(), "0750"), "%s",
              adag_last_error());
    /* a symlink to a good directory is not followed */
    chmod(want, 0700);
    snprintf(real, sizeof(real), "%s/real", tmp);
    cr_assert(rename(want, real) == 0 && symlink(real, want) == 0);
    cr_assert_eq(adag__live_dir(dir, sizeof(dir)), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), "not a directory"), "%s", adag_last_error());
}

Test(live, views, .timeout = 10)
{
    make_tmp();
    int fds = count_fds();
    view_t v = {0}, v2 = {0};
    adag_live_t *l = open_live(NULL, &v), *l2, *dup = NULL;
    char want[128], want2[128];
    snprintf(want, sizeof(want), "%s/adag/%d.sock", tmp, (int)getpid());
    cr_assert_str_eq(adag__live_path(l), want);
    struct stat st;
    cr_assert(stat(want, &st) == 0 && S_ISSOCK(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
    int fd = connect_to(want);
    expect(fd, ADAG_OK, "view 1\n");
    expect(fd, ADAG_OK, "view 2\n");

    /* a second view in this process, and that name again once free */
    l2 = open_live(NULL, &v2);
    snprintf(want2, sizeof(want2), "%s/adag/%d-2.sock", tmp, (int)getpid());
    cr_assert_str_eq(adag__live_path(l2), want2);
    adag__live_close(l2);
    cr_assert_eq(stat(want2, &st), -1, "closed: no socket file");
    l2 = open_live(NULL, &v2);
    cr_assert_str_eq(adag__live_path(l2), want2);
    int fd2 = connect_to(want2);
    expect(fd2, ADAG_OK, "view 1\n");
    adag__live_close(l2);
    close(fd2);

    /* the same exact path while open: busy */
    cr_assert_eq(adag__live_open(want, render, &v, &dup), ADAG_ERR_BUSY, "%s", adag_last_error());
    cr_assert(strstr(adag_last_error(), want), "%s", adag_last_error());
    cr_assert_null(dup);
    expect(fd, ADAG_OK, "view 3\n");

    adag__live_close(l);
    adag__live_close(NULL);
    cr_assert_eq(stat(want, &st), -1, "closed: no socket file");
    expect(fd, ADAG_ERR_CLOSED, want);
    close(fd);
    cr_assert_eq(count_fds(), fds, "every fd closed");
}

/* Connects, sends n bytes of req, and reads to EOF: the server's answer. */
static void bad_request(const char *path, const char *req, size_t n, const char *answer)
{
    static char buf[4096];
    int a = connect_to(path);
    cr_assert_eq(send(a, req, n, MSG_NOSIGNAL), (ssize_t)n);
    cr_assert_geq(read_to_eof(a, buf, sizeof(buf), TMO), 0, "the server closes the connection");
    cr_assert(strncmp(buf, "ADAG-LIVE 1 ERR ", 16) == 0, "%s", buf);
    cr_assert(strstr(buf, answer), "\"%s\" lacks \"%s\"", buf, answer);
    close(a);
}

Test(live, bad_requests, .timeout = 10)
{
    make_tmp();
    view_t v = {0};
    adag_live_t *l = open_live(NULL, &v);
    char line[1000];
    memset(line, 'x', sizeof(line));
    bad_request(adag__live_path(l), line, sizeof(line), "request line longer than 64 bytes");
    bad_request(adag__live_path(l), "hello\n", 6, "unknown request \"hello\"");
    /* the bound is 64 bytes, newline included: 64 is a request, 65 too long */
    line[63] = '\n';
    bad_request(adag__live_path(l), line, 64, "unknown request \"xxx");
    line[63] = 'x', line[64] = '\n';
    bad_request(adag__live_path(l), line, 65, "request line longer than 64 bytes");
    /* others are still served */
    int b = connect_to(adag__live_path(l));
    expect(b, ADAG_OK, "view 1\n");
    close(b);
    adag__live_close(l);
}

Test(live, render_fails, .timeout = 10)
{
    make_tmp();
    view_t v = {0};
    adag_live_t *l = open_live(NULL, &v);
    int fd = connect_to(adag__live_path(l));
    expect(fd, ADAG_OK, "view 1\n");
    atomic_store(&v.fail, 1);
    expect(fd, ADAG_ERR_PROTOCOL, "the driver could not render the view");
    atomic_store(&v.fail, 0);
    expect(fd, ADAG_OK, "view 3\n");
    /* exactly the cap passes, a byte more is refused */
    atomic_store(&v.big, ADAG_LIVE_REPLY_MAX);
    cr_assert_eq(expect(fd, ADAG_OK, NULL), ADAG_LIVE_REPLY_MAX);
    atomic_store(&v.big, ADAG_LIVE_REPLY_MAX + 1);
    expect(fd, ADAG_ERR_PROTOCOL, "more than the 4194304 bytes");
    atomic_store(&v.big, 0);
    expect(fd, ADAG_OK, "view 6\n");
    close(fd);
    adag__live_close(l);
}

Test(live, stale_socket, .timeout = 10)
{
    make_tmp();
    char path[128];
    snprintf(path, sizeof(path), "%s/stale.sock", tmp);
    socket_file_at(path);
    int fd = -1;
    cr_assert_eq(adag__live_connect(path, &fd), ADAG_ERR_IO, "nobody listens");
    cr_assert(strstr(adag_last_error(), path), "%s", adag_last_error());
    view_t v = {0};
    adag_live_t *l = open_live(path, &v);
    cr_assert_str_eq(adag__live_path(l), path);
    fd = connect_to(path);
    expect(fd, ADAG_OK, "view 1\n");
    close(fd);
    adag__live_close(l);

    /* a file that is no socket is never replaced */
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs("keep", f);
    fclose(f);
    cr_assert_eq(adag__live_open(path, render, &v, &l), ADAG_ERR_INVALID);
    cr_assert(strstr(adag_last_error(), path), "%s", adag_last_error());
    struct stat st;
    cr_assert(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 4);
}

Test(live, clients, .timeout = 15)
{
    make_tmp();
    view_t v = {0};
    adag_live_t *l = open_live(NULL, &v);
    int c[ADAG_LIVE_MAX_CLIENTS];
    for (int i = 0; i < ADAG_LIVE_MAX_CLIENTS; i++) {
        c[i] = connect_to(adag__live_path(l));
        expect(c[i], ADAG_OK, NULL);
    }
    int ninth = connect_to(adag__live_path(l));
    expect(ninth, ADAG_ERR_PROTOCOL, "too many clients");
    close(ninth);
    /* one leaves: a newcomer is served (once the server saw it go) */
    close(c[0]);
    FILE *devnull = fopen("/dev/null", "w");
    adag_status_t st = ADAG_ERR_PROTOCOL;
    for (int tries = 0; tries < 100 && st != ADAG_OK; tries++) {
        usleep(10000);
        c[0] = connect_to(adag__live_path(l));
        if ((st = adag__live_request(c[0], devnull, TMO)) != ADAG_OK)
            close(c[0]);
    }
    cr_assert_eq(st, ADAG_OK, "%s", adag_last_error());
    fclose(devnull);

    /* a client that sends requests and reads nothing is dropped after about
     * ADAG_LIVE_SEND_TIMEOUT_MS; the others wait no longer than that */
    int calls = atomic_load(&v.calls);
    atomic_store(&v.big, 1u << 20);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(send(c[1], "stats\n", 6, MSG_NOSIGNAL), 6);
    while (atomic_load(&v.calls) == calls)
        usleep(1000);
    atomic_store(&v.big, 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    expect(c[2], ADAG_OK, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_assert_lt(s, 2.0, "a stalled client held the others %.2f s", s);
    static char sink[8u << 20];
    cr_assert_geq(read_to_eof(c[1], sink, sizeof(sink), TMO), 0, "the stalled client is dropped");
    for (int i = 0; i < ADAG_LIVE_MAX_CLIENTS; i++)
        close(c[i]);
    adag__live_close(l);
}

#define ASSERT_HAS(text, needle) \
    cr_assert(strstr((text), (needle)), "output lacks \"%s\":\n%s", (needle), (text))

Test(live, attach_tool, .timeout = 30)
{
    make_tmp();
    view_t v = {0}, v2 = {0};
    adag_live_t *l = open_live(NULL, &v);
    char args[256], stale[128];
    int rc;
    snprintf(args, sizeof(args), "attach %s --count 2 --interval 0.1", adag__live_path(l));
    char *out = run_info(args, &rc);
    cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
    ASSERT_HAS(out, "--- view 1\nview 1\n");
    ASSERT_HAS(out, "--- view 2\nview 2\n");
    cr_assert_null(strstr(out, "view 3"), "--count 2: two views:\n%s", out);
    free(out);

    /* by PID, and with no target: the only live one; a stale socket of a
     * dead process is named and skipped */
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(stale, sizeof(stale), "%s/adag/%d.sock", tmp, (int)dead);
    socket_file_at(stale);
    snprintf(args, sizeof(args), "attach %d --count 1", (int)getpid());
    out = run_info(args, &rc);
    cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
    ASSERT_HAS(out, "--- view 1\nview 3\n");
    free(out);
    out = run_info("attach --count 1", &rc);
    cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
    ASSERT_HAS(out, "view 4\n");
    ASSERT_HAS(out, stale);
    ASSERT_HAS(out, "is stale");
    free(out);

    /* two live: the tool lists them and asks */
    adag_live_t *l2 = open_live(NULL, &v2);
    out = run_info("attach", &rc);
    cr_assert_eq(rc, 2, "exit %d:\n%s", rc, out);
    ASSERT_HAS(out, adag__live_path(l));
    ASSERT_HAS(out, adag__live_path(l2));
    free(out);
    adag__live_close(l2);

    /* the driver closes after a view: exit 0 with a word about it */
    snprintf(args, sizeof(args), "attach %s --interval 0.05", adag__live_path(l));
    FILE *p = start_info(args);
    char line[256] = "";
    while (fgets(line, sizeof(line), p) && strncmp(line, "view ", 5) != 0)
        ;
    cr_assert(strncmp(line, "view ", 5) == 0, "first view: %s", line);
    adag__live_close(l);
    out = finish(p, &rc);
    cr_assert_eq(rc, 0, "exit %d:\n%s", rc, out);
    ASSERT_HAS(out, "adag-info attach: the driver closed the connection");
    free(out);
}

Test(live, attach_none, .timeout = 10)
{
    make_tmp();
    int rc;
    char *out = run_info("attach", &rc), want[160];
    cr_assert_eq(rc, 1, "exit %d:\n%s", rc, out);
    snprintf(want, sizeof(want), "no adag driver has a live view open in %s/adag", tmp);
    ASSERT_HAS(out, want);
    free(out);
    out = run_info("attach 999999999", &rc);
    cr_assert_eq(rc, 1, "exit %d:\n%s", rc, out);
    ASSERT_HAS(out, "999999999.sock");
    free(out);
}

/* A child as uid 65534 connects to path and asks: 0 if that ends with
 * status want and a message containing msg. */
static int child_as_nobody(const char *path, adag_status_t want, const char *msg)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = -1;
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(10);
        adag_status_t st = adag__live_connect(path, &fd);
        if (st == ADAG_OK)
            st = adag__live_request(fd, stdout, TMO);
        if (st == want && strstr(adag_last_error(), msg))
            _exit(0);
        fprintf(stderr, "child: %d: %s\n", st, adag_last_error());
        _exit(12);
    }
    int w;
    cr_assert_eq(waitpid(pid, &w, 0), pid);
    return WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
}

Test(live, peer_uid, .timeout = 10)
{
    if (geteuid() != 0)
        cr_skip_test("skipped: needs root to connect as another uid");
    make_tmp();
    char dir[128], path[160];
    snprintf(dir, sizeof(dir), "%s/open", tmp);
    cr_assert(mkdir(dir, 0777) == 0 && chmod(dir, 0777) == 0 && chmod(tmp, 0755) == 0);
    snprintf(path, sizeof(path), "%s/peer.sock", dir);
    view_t v = {0};
    adag_live_t *l = open_live(path, &v);
    /* the socket's mode keeps another uid out ... */
    cr_assert_eq(child_as_nobody(path, ADAG_ERR_IO, "Permission denied"), 0,
                 "connect as uid 65534 to a 0600 socket");
    /* ... and past it (a socket made reachable), the peer check */
    cr_assert_eq(chmod(path, 0666), 0);
    cr_assert_eq(child_as_nobody(path, ADAG_ERR_PROTOCOL,
                                 "refused: uid 65534 is not this driver's uid 0"), 0);
    int fd = connect_to(path);
    expect(fd, ADAG_OK, "view 1\n");
    close(fd);
    adag__live_close(l);
}
