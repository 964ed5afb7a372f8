#include "probes.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int probe_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

int probe_count_maps(const char *needle)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

int probe_stat(pid_t pid, pid_t *ppid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command may hold spaces and parentheses */
    if (!p)
        return -1;
    int pp;
    char st;
    if (sscanf(p + 1, " %c %d", &st, &pp) != 2)
        return -1;
    if (ppid)
        *ppid = pp;
    if (state)
        *state = st;
    return 0;
}

int probe_children(pid_t parent, pid_t *out, int max, int *zombies)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    int n = 0, z = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name), ppid;
        char st;
        if (probe_stat(pid, &ppid, &st) != 0 || ppid != parent)
            continue;
        if (out && n < max)
            out[n] = pid;
        n++;
        if (st == 'Z')
            z++;
    }
    closedir(d);
    if (zombies)
        *zombies = z;
    return n;
}

/* Reads at most n - 1 bytes of a /proc file into buf (NUL-terminated);
 * leaves buf alone if the file cannot be opened. */
static size_t read_small(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
    return k;
}

void probe_describe(pid_t pid, char *out, size_t n)
{
    char path[64], wchan[64] = "?", cmd[160] = "?";
    pid_t ppid = 0;
    char st = '?';
    if (probe_stat(pid, &ppid, &st) != 0) {
        snprintf(out, n, "no /proc entry (gone)");
        return;
    }
    snprintf(path, sizeof(path), "/proc/%d/wchan", (int)pid);
    read_small(path, wchan, sizeof(wchan));
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    size_t k = read_small(path, cmd, sizeof(cmd));
    for (size_t i = 0; i + 1 < k; i++)
        if (cmd[i] == '\0')
            cmd[i] = ' ';
    /* every thread's wait channel: the main thread alone hides a method
     * thread stuck in a sleep or a loop */
    char threads[200] = "";
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        size_t used = 0;
        while ((e = readdir(d)) != NULL && used + 40 < sizeof(threads)) {
            if (!isdigit((unsigned char)e->d_name[0]))
                continue;
            char tp[96], tw[40] = "?", ts = '?', b[512];
            snprintf(tp, sizeof(tp), "/proc/%d/task/%s/wchan", (int)pid, e->d_name);
            read_small(tp, tw, sizeof(tw));
            snprintf(tp, sizeof(tp), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
            if (read_small(tp, b, sizeof(b))) {
                char *q = strrchr(b, ')');
                if (q && q[1] == ' ')
                    ts = q[2];
            }
            used += (size_t)snprintf(threads + used, sizeof(threads) - used, "%s%s:%c:%s",
                                     used ? " " : "", e->d_name, ts, tw);
        }
        closedir(d);
    }
    const char *what = st == 'T' ? "stopped" : st == 't' ? "traced" : st == 'Z' ? "zombie"
                     : st == 'R' ? "running" : st == 'S' ? "sleeping" : st == 'D' ? "disk sleep"
                                                                                 : "?";
    snprintf(out, n,
             "/proc/%d/stat state %c (%s), ppid %d, wchan %s, threads (tid:state:wchan) %s, "
             "cmd: %s",
             (int)pid, st, what, (int)ppid, wchan, threads, cmd);
}

int probe_comm(pid_t pid, char *out, size_t n)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    if (!fgets(out, (int)n, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

int probe_device_objects(pid_t pid)
{
    char path[64], link[256];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    if (!d)
        return -1;
    while ((e = readdir(d))) {
        char p[320];
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        ssize_t len = readlink(p, link, sizeof(link) - 1);
        if (len <= 0)
            continue;
        link[len] = '\0';
        n += strstr(link, "memfd:adag-event") != NULL || strstr(link, "memfd:adag-dev") != NULL;
    }
    closedir(d);
    return n;
}

typedef struct {
    unsigned long ino;
    long long bytes;
} memfd_entry_t;

/* The entry of ino in *t (added with 0 bytes if new); NULL without memory. */
static memfd_entry_t *memfd_entry(memfd_entry_t **t, size_t *n, size_t *cap, unsigned long ino)
{
    for (size_t k = 0; k < *n; k++)
        if ((*t)[k].ino == ino)
            return &(*t)[k];
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 64;
        memfd_entry_t *more = realloc(*t, c * sizeof(*more));
        if (!more)
            return NULL;
        *t = more;
        *cap = c;
    }
    (*t)[*n] = (memfd_entry_t){ino, 0};
    return &(*t)[(*n)++];
}

long long probe_memfd_bytes(const pid_t *pids, int n, const char *name)
{
    /* per memfd: the bytes one process maps of it (its mappings summed: a
     * range bound to a NUMA node is a mapping of its own), the largest
     * over the processes */
    memfd_entry_t *all = NULL, *mine = NULL;
    size_t nall = 0, call = 0, nmine = 0, cmine = 0;
    long long total = 0;
    char prefix[128];
    snprintf(prefix, sizeof(prefix), "/memfd:%s", name);
    for (int i = 0; i < n && total >= 0; i++) {
        char path[64], line[4096];
        snprintf(path, sizeof(path), "/proc/%d/maps", (int)pids[i]);
        FILE *f = fopen(path, "re");
        if (!f) {
            total = -1;
            break;
        }
        nmine = 0;
        while (fgets(line, sizeof(line), f)) {
            unsigned long lo, hi, ino;
            int at = 0;
            if (sscanf(line, "%lx-%lx %*s %*s %*s %lu %n", &lo, &hi, &ino, &at) != 3 ||
                strncmp(line + at, prefix, strlen(prefix)) != 0)
                continue;
            memfd_entry_t *e = memfd_entry(&mine, &nmine, &cmine, ino);
            if (!e) {
                total = -1;
                break;
            }
            e->bytes += (long long)(hi - lo);
        }
        fclose(f);
        for (size_t k = 0; k < nmine && total >= 0; k++) {
            memfd_entry_t *e = memfd_entry(&all, &nall, &call, mine[k].ino);
            if (!e)
                total = -1;
            else if (mine[k].bytes > e->bytes)
                e->bytes = mine[k].bytes;
        }
    }
    for (size_t k = 0; k < nall && total >= 0; k++)
        total += all[k].bytes;
    free(all);
    free(mine);
    return total;
}
