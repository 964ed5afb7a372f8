/* Hosts made of network namespaces (tests/netns_rig.h). */
#include "netns_rig.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define NETNS_DIR "/var/run/netns"

/* Runs an `ip` command line quietly; its exit status (-1: not run). */
static int ip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int ip(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(cmd, sizeof(cmd), "ip ");
    vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
    va_end(ap);
    strncat(cmd, " >/dev/null 2>&1", sizeof(cmd) - strlen(cmd) - 1);
    int st = system(cmd);
    return st == -1 ? -1 : WEXITSTATUS(st);
}

/* Namespaces "adag<pid>..." whose process is gone: a test killed mid-way. */
static void sweep_stale(void)
{
    DIR *d = opendir(NETNS_DIR);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid;
        char rest[64];
        if (sscanf(e->d_name, "adag%d%63s", &pid, rest) != 2 || pid <= 0)
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH)
            continue;
        ip("netns del %s", e->d_name);
    }
    closedir(d);
}

int h_netns_up(h_netns_t *h, unsigned n, char *why, size_t why_len)
{
    memset(h, 0, sizeof(*h));
    if (n == 0 || n > H_NETNS_MAX) {
        snprintf(why, why_len, "%u hosts asked, at most %d", n, H_NETNS_MAX);
        return -1;
    }
    if (geteuid() != 0) {
        snprintf(why, why_len, "network namespaces need root");
        return -1;
    }
    if (ip("-V") != 0) {
        snprintf(why, why_len, "no `ip` command (Debian's iproute2)");
        return -1;
    }
    sweep_stale();
    pid_t me = getpid();
    snprintf(h->bridge, sizeof(h->bridge), "adag%dbr", (int)me);
    if (ip("netns add %s", h->bridge) != 0) {
        snprintf(why, why_len, "`ip netns add` is not permitted here");
        return -1;
    }
    h->n = n;
    /* a /24 per test process: two tests running at once never collide */
    unsigned a = 100 + (unsigned)me % 100, b = ((unsigned)me / 100) % 250;
    if (ip("-n %s link add br0 type bridge", h->bridge) != 0 ||
        ip("-n %s link set br0 up", h->bridge) != 0)
        goto fail;
    for (unsigned i = 0; i < n; i++) {
        snprintf(h->ns[i], sizeof(h->ns[i]), "adag%dh%u", (int)me, i);
        snprintf(h->ip[i], sizeof(h->ip[i]), "10.%u.%u.%u", a, b, i + 1);
        if (ip("netns add %s", h->ns[i]) != 0 ||
            ip("-n %s link add v%u type veth peer name eth0 netns %s", h->bridge, i,
               h->ns[i]) != 0 ||
            ip("-n %s link set v%u master br0 up", h->bridge, i) != 0 ||
            ip("-n %s addr add %s/24 dev eth0", h->ns[i], h->ip[i]) != 0 ||
            ip("-n %s link set eth0 up", h->ns[i]) != 0 ||
            ip("-n %s link set lo up", h->ns[i]) != 0)
            goto fail;
    }
    /* no STP on br0: its ports forward as soon as they are up */
    return 0;
fail:
    snprintf(why, why_len, "building the namespaces with `ip` failed (veth or bridge refused)");
    h_netns_down(h);
    return -1;
}

void h_netns_down(h_netns_t *h)
{
    for (unsigned i = 0; i < h->n; i++)
        if (h->ns[i][0])
            ip("netns del %s", h->ns[i]);
    if (h->bridge[0])
        ip("netns del %s", h->bridge);
    memset(h, 0, sizeof(*h));
}

int h_netns_join(const char *ns)
{
    char path[128];
    snprintf(path, sizeof(path), NETNS_DIR "/%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = setns(fd, CLONE_NEWNET);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

void h_netns_link(const h_netns_t *h, unsigned i, int up)
{
    ip("-n %s link set v%u %s", h->bridge, i, up ? "up" : "down");
}

void h_netns_blackhole(const h_netns_t *h, unsigned from, unsigned to, int on)
{
    ip("-n %s route %s blackhole %s/32", h->ns[from], on ? "add" : "del", h->ip[to]);
}

void h_netns_ucx_env(void)
{
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_NET_DEVICES", "eth0", 1);
}
