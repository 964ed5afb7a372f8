/* adag-info attach: watch a running driver's live view (common/live.h),
 * refreshed every interval, until Ctrl-C, --count views or the driver goes. */
#include "tools/info_attach.h"

#include "common/live.h"

#include <adag.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define ATTACH_TIMEOUT_MS 5000 /* one request and its reply */
#define ATTACH_LIST_MAX 256    /* live views listed when several are open */
#define PATH_CAP sizeof(((struct sockaddr_un *)0)->sun_path)

static int usage(void)
{
    fprintf(stderr,
            "usage: adag-info attach [PID | SOCKET-PATH] [--interval SECONDS] [--count N]\n"
            "  PID          the driver whose live view to show (its socket in the live view\n"
            "               directory); SOCKET-PATH (with a '/') that socket; neither: the one\n"
            "               driver with a live view open\n"
            "  --interval S seconds between views, 0.05 to 3600 (default 1)\n"
            "  --count N    stop after N views\n");
    return 2;
}

/* The pid of a socket named "<pid>.sock" or "<pid>-<n>.sock", else -1. */
static long pid_of_name(const char *name)
{
    char *end;
    errno = 0;
    long pid = strtol(name, &end, 10);
    if (errno || end == name || name[0] < '0' || name[0] > '9' || pid <= 0 || pid > INT32_MAX)
        return -1;
    if (*end == '-') {
        const char *n = end + 1;
        strtol(n, &end, 10);
        if (end == n || n[0] < '0' || n[0] > '9')
            return -1;
    }
    return strcmp(end, ".sock") == 0 ? pid : -1;
}

typedef struct {
    long pid;
    char name[64];
} found_t;

static int by_name(const void *a, const void *b)
{
    const found_t *x = a, *y = b;
    return x->pid != y->pid ? (x->pid < y->pid ? -1 : 1) : strcmp(x->name, y->name);
}

/* No target given: the one live view in the directory, into path.
 * 0, or the exit status (1: none or an error, 2: several). */
static int find_only(char *path, size_t cap)
{
    char dir[PATH_CAP];
    if (adag__live_dir(dir, sizeof(dir)) != ADAG_OK) {
        fprintf(stderr, "adag-info attach: %s\n", adag_last_error());
        return 1;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "adag-info attach: cannot read %s: %s\n", dir, strerror(errno));
        return 1;
    }
    static found_t found[ATTACH_LIST_MAX];
    unsigned n = 0, more = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long pid = pid_of_name(e->d_name);
        if (pid < 0 || strlen(e->d_name) >= sizeof(found[0].name))
            continue;
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            fprintf(stderr, "adag-info attach: %s/%s is stale (process %ld is gone)\n", dir,
                    e->d_name, pid);
            continue;
        }
        if (n == ATTACH_LIST_MAX) {
            more++;
            continue;
        }
        found[n].pid = pid;
        snprintf(found[n].name, sizeof(found[n].name), "%s", e->d_name);
        n++;
    }
    closedir(d);
    if (n == 0) {
        fprintf(stderr, "adag-info attach: no adag driver has a live view open in %s (a driver "
                        "opens one with ADAG_LIVE=1 or adag__live_open)\n", dir);
        return 1;
    }
    qsort(found, n, sizeof(found[0]), by_name);
    if (n > 1) {
        fprintf(stderr, "adag-info attach: %u adag drivers have a live view open; name one:\n"
                        "PID  PATH\n", n + more);
        for (unsigned i = 0; i < n; i++)
            fprintf(stderr, "%ld  %s/%s\n", found[i].pid, dir, found[i].name);
        if (more)
            fprintf(stderr, "(and %u more)\n", more);
        return 2;
    }
    if ((size_t)snprintf(path, cap, "%s/%s", dir, found[0].name) >= cap) {
        fprintf(stderr, "adag-info attach: %s/%s: the path is too long\n", dir, found[0].name);
        return 1;
    }
    return 0;
}

/* The socket path of target (a PID or a path with a '/'), or of the one
 * live view open when target is NULL. 0, or the exit status. */
static int resolve(const char *target, char *path, size_t cap)
{
    if (!target)
        return find_only(path, cap);
    if (strchr(target, '/')) {
        if (strlen(target) >= cap) {
            fprintf(stderr, "adag-info attach: %s: a socket path is at most %zu bytes\n", target,
                    cap - 1);
            return 1;
        }
        snprintf(path, cap, "%s", target);
        return 0;
    }
    char *end;
    errno = 0;
    long pid = strtol(target, &end, 10);
    if (errno || *end || end == target || pid <= 0 || pid > INT32_MAX) {
        fprintf(stderr, "adag-info attach: \"%s\" is neither a PID nor a socket path (one with "
                        "a '/')\n", target);
        return 2;
    }
    char dir[PATH_CAP];
    if (adag__live_dir(dir, sizeof(dir)) != ADAG_OK) {
        fprintf(stderr, "adag-info attach: %s\n", adag_last_error());
        return 1;
    }
    if ((size_t)snprintf(path, cap, "%s/%ld.sock", dir, pid) >= cap) {
        fprintf(stderr, "adag-info attach: %s/%ld.sock: the path is too long\n", dir, pid);
        return 1;
    }
    return 0;
}

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Requests and prints views on fd until count (0: no end), the driver
 * closing or an error. Returns the exit status. */
static int watch(int fd, const char *path, long pid, double interval, unsigned long count)
{
    int tty = isatty(STDOUT_FILENO);
    for (unsigned long view = 1;; view++) {
        char *text = NULL;
        size_t size = 0;
        FILE *m = open_memstream(&text, &size);
        if (!m) {
            fprintf(stderr, "adag-info attach: open_memstream: %s\n", strerror(errno));
            return 1;
        }
        adag_status_t st = adag__live_request(fd, m, ATTACH_TIMEOUT_MS);
        if (fclose(m) != 0 && st == ADAG_OK) {
            fprintf(stderr, "adag-info attach: the view: %s\n", strerror(errno));
            st = ADAG_ERR_NO_MEMORY;
        } else if (st == ADAG_ERR_CLOSED) {
            fprintf(view > 1 ? stdout : stderr,
                    "adag-info attach: the driver closed the connection\n");
        } else if (st != ADAG_OK) {
            fprintf(stderr, "adag-info attach: %s\n", adag_last_error());
        }
        if (st != ADAG_OK) {
            free(text);
            return st == ADAG_ERR_CLOSED && view > 1 ? 0 : 1;
        }
        /* the new view is in hand before the old one is cleared: no blank screen */
        if (tty)
            printf("\033[H\033[2J"
                   "adag-info attach: driver %ld, %s, every %g s (Ctrl-C to stop)\n",
                   pid, path, interval);
        else
            printf("--- view %lu\n", view);
        fwrite(text, 1, size, stdout);
        if (size == 0 || text[size - 1] != '\n')
            putchar('\n');
        free(text);
        if (fflush(stdout) != 0) {
            fprintf(stderr, "adag-info attach: writing the view: %s\n", strerror(errno));
            return 1;
        }
        if (count && view == count)
            return 0;
        sleep_s(interval);
    }
}

int adag__info_attach(int argc, char **argv)
{
    const char *target = NULL;
    double interval = 1.0;
    unsigned long count = 0;
    for (int i = 0; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--interval") == 0 && i + 1 < argc) {
            interval = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !isfinite(interval) || interval < 0.05 ||
                interval > 3600) {
                fprintf(stderr, "adag-info attach: --interval %s: seconds from 0.05 to 3600\n",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            errno = 0;
            count = strtoul(argv[++i], &end, 10);
            if (errno || *end || end == argv[i] || argv[i][0] == '-' || count == 0) {
                fprintf(stderr, "adag-info attach: --count %s: a number of views, 1 or more\n",
                        argv[i]);
                return 2;
            }
        } else if (argv[i][0] != '-' && !target) {
            target = argv[i];
        } else {
            return usage();
        }
    }
    char path[PATH_CAP];
    int rc = resolve(target, path, sizeof(path));
    if (rc != 0)
        return rc;
    int fd;
    if (adag__live_connect(path, &fd) != ADAG_OK) {
        fprintf(stderr, "adag-info attach: %s\n", adag_last_error());
        return 1;
    }
    /* the driver's pid: the peer's credentials (the name may be any path) */
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    const char *base = strrchr(path, '/');
    long pid = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 ? (long)cr.pid
                                                                         : pid_of_name(base + 1);
    rc = watch(fd, path, pid, interval, count);
    close(fd);
    return rc;
}
