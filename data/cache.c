/*
 * The shard cache of data/cache.h: entries, their locks, their checksums,
 * and eviction of the least recently used under a byte cap.
 *
 * An entry "<dir>/<hash>-<name>" (hash: XXH3-64 of the URL; name: the
 * URL's last path component, sanitized, for people reading the directory)
 * has three files: the data, "<data>.sum" ("adag-cache 1", size, checksum,
 * URL) and "<data>.lock". Lock files may be unlinked by an evictor, so a
 * locker checks after flock that its fd is still the file at the path
 * (else it locked an orphan and tries again). Eviction runs under the
 * directory's ".lock" (one evictor at a time) and takes each victim's lock
 * exclusively without waiting: a victim in use is skipped.
 */
#include "data/cache.h"

#include "common/error.h"
#include "data/settings.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define SUM_MAGIC "adag-cache 1"
#define NAME_MAX_KEEP 64

struct adag_data_cache {
    char *dir;
    uint64_t cap;
    adag_data_fetch_opts_t fetch;
    pthread_mutex_t lock; /* guards held and stats */
    int *held;            /* lock fds held shared until close */
    size_t nheld, cap_held;
    adag_data_cache_stats_t stats;
};

/* ---- the directory ---- */

static adag_status_t make_dir(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof(path), "%s", dir) >= (int)sizeof(path))
        return adag__error(ADAG_ERR_INVALID, "data cache: directory name too long: %s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return adag__error_errno(errno, "data cache: creating %s", path);
        *p = '/';
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return adag__error_errno(errno, "data cache: creating %s", path);
    struct stat s;
    if (stat(path, &s) != 0)
        return adag__error_errno(errno, "data cache: %s", path);
    if (!S_ISDIR(s.st_mode))
        return adag__error(ADAG_ERR_INVALID, "data cache: %s is not a directory", path);
    if (s.st_uid != geteuid() || (s.st_mode & 0022))
        return adag__error(ADAG_ERR_INVALID,
                          "data cache: %s is not this user's or others may write it (mode "
                          "%03o): refusing to use it",
                          path, (unsigned)(s.st_mode & 0777));
    return ADAG_OK;
}

adag_status_t adag__data_cache_open(const char *dir, uint64_t cap_bytes,
                                   const adag_data_fetch_opts_t *fetch, adag_data_cache_t **out)
{
    *out = NULL;
    if (!dir || !dir[0])
        return adag__error(ADAG_ERR_INVALID, "data cache: no directory");
    if (cap_bytes == 0)
        return adag__error(ADAG_ERR_INVALID, "data cache: a cap of 0 bytes");
    adag_status_t st = make_dir(dir);
    if (st != ADAG_OK)
        return st;
    adag_data_cache_t *c = calloc(1, sizeof(*c));
    if (!c || !(c->dir = strdup(dir))) {
        free(c);
        return adag__error(ADAG_ERR_NO_MEMORY, "data cache: out of memory");
    }
    c->cap = cap_bytes;
    c->fetch = *fetch;
    c->fetch.max_bytes = cap_bytes;
    pthread_mutex_init(&c->lock, NULL);
    *out = c;
    return ADAG_OK;
}

/* ---- an entry's files ---- */

typedef struct {
    char data[4096], sum[4112], lock[4112];
} entry_paths_t;

static adag_status_t entry_paths(const adag_data_cache_t *c, const char *url, const char *suffix,
                                 entry_paths_t *e, char **stem)
{
    const char *base = strrchr(url, '/');
    base = base && base[1] ? base + 1 : "shard";
    char name[NAME_MAX_KEEP + 1];
    size_t n = 0;
    for (; base[n] && base[n] != '?' && base[n] != '#' && n < NAME_MAX_KEEP; n++) {
        char ch = base[n];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '-' || ch == '_';
        name[n] = ok ? ch : '_';
    }
    name[n] = '\0';
    char s[4096];
    int len = snprintf(s, sizeof(s), "%s/%016" PRIx64 "-%s", c->dir,
                       (uint64_t)XXH3_64bits(url, strlen(url)), name);
    if (len < 0 || (size_t)len + strlen(suffix) + 8 >= sizeof(e->data))
        return adag__error(ADAG_ERR_INVALID, "data cache: path too long for %s", url);
    snprintf(e->data, sizeof(e->data), "%s%s", s, suffix);
    snprintf(e->sum, sizeof(e->sum), "%s.sum", e->data);
    snprintf(e->lock, sizeof(e->lock), "%s.lock", e->data);
    if (stem && !(*stem = strdup(s)))
        return adag__error(ADAG_ERR_NO_MEMORY, "data cache: out of memory");
    return ADAG_OK;
}

/* Opens and flocks an entry's lock file (op LOCK_SH or LOCK_EX, maybe
 * | LOCK_NB); -1 if it would block (LOCK_NB) or on an error (errno). */
static int lock_entry(const char *path, int op)
{
    for (;;) {
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            return -1;
        int rc;
        while ((rc = flock(fd, op)) != 0 && errno == EINTR)
            ;
        if (rc != 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
            a.st_dev == b.st_dev)
            return fd;
        close(fd); /* an evictor unlinked it after we opened it: again */
    }
}

/* Reads an entry's sidecar: 1 if it is whole and names url. */
static int read_sum(const char *path, const char *url, uint64_t *size, uint64_t *hash)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char magic[32] = "", u[4096] = "";
    unsigned long long sz = 0, h = 0;
    int ok = fgets(magic, sizeof(magic), f) && !strcmp(magic, SUM_MAGIC "\n") &&
             fscanf(f, "size %llu\nxxh3 %llx\nurl %4095s\n", &sz, &h, u) == 3 && !strcmp(u, url);
    fclose(f);
    *size = sz;
    *hash = h;
    return ok;
}

/* Whether the entry's data matches its sidecar (and so may be used). */
static int entry_valid(const entry_paths_t *e, const char *url)
{
    uint64_t size, hash, got;
    if (!read_sum(e->sum, url, &size, &hash))
        return 0;
    int fd = open(e->data, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat s;
    int ok = fstat(fd, &s) == 0 && (uint64_t)s.st_size == size &&
             adag__data_file_hash(fd, size, &got) == ADAG_OK && got == hash;
    close(fd);
    if (!ok)
        ADAG_DATA_LOG_WARN("data cache: %s does not match its checksum: fetching %s again",
                           e->data, url);
    return ok;
}

/* ---- eviction ---- */

typedef struct {
    char *data; /* the entry's data path */
    uint64_t size;
    struct timespec used;
} victim_t;

static int by_use(const void *a, const void *b)
{
    const victim_t *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    return x->used.tv_nsec < y->used.tv_nsec ? -1 : x->used.tv_nsec > y->used.tv_nsec;
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n > m && !strcmp(s + n - m, suf);
}

/* Removes the files of an entry whose lock this caller holds exclusively
 * (and leftover temporary files of a crashed fetch). */
static void remove_entry(const char *data)
{
    char p[4112];
    snprintf(p, sizeof(p), "%s.sum", data);
    unlink(p);
    unlink(data);
    snprintf(p, sizeof(p), "%s.lock", data);
    unlink(p);
}

/* Evicts least recently used entries no one uses until `need` more bytes
 * fit under the cap (as far as entries not in use allow). */
static void make_room(adag_data_cache_t *c, uint64_t need)
{
    char path[4112];
    snprintf(path, sizeof(path), "%s/.lock", c->dir);
    int dfd = lock_entry(path, LOCK_EX);
    DIR *d = opendir(c->dir);
    victim_t *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!has_suffix(de->d_name, ".sum") && !strstr(de->d_name, ".tmp."))
            continue;
        char full[4112];
        snprintf(full, sizeof(full), "%s/%s", c->dir, de->d_name);
        if (strstr(de->d_name, ".tmp.")) {
            /* a fetch's temporary file: its entry's lock is held while the
             * fetch lives; free, it was left by a crash */
            char data[4112], lock[4200];
            snprintf(data, sizeof(data), "%s", full);
            *strstr(data + strlen(c->dir), ".tmp.") = '\0';
            if (has_suffix(data, ".sum"))
                data[strlen(data) - 4] = '\0';
            snprintf(lock, sizeof(lock), "%s.lock", data);
            int fd = lock_entry(lock, LOCK_EX | LOCK_NB);
            if (fd >= 0) {
                unlink(full);
                close(fd);
            }
            continue;
        }
        struct stat ss, sd;
        char data[4112];
        snprintf(data, sizeof(data), "%s", full);
        data[strlen(data) - 4] = '\0';
        if (stat(full, &ss) != 0)
            continue;
        uint64_t size = stat(data, &sd) == 0 ? (uint64_t)sd.st_size : 0;
        total += size;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            victim_t *nv = realloc(v, ncap * sizeof(*nv));
            if (!nv)
                break;
            v = nv;
            cap = ncap;
        }
        if (!(v[n].data = strdup(data)))
            break;
        v[n].size = size;
        v[n].used = ss.st_mtim;
        n++;
    }
    if (d)
        closedir(d);
    if (n)
        qsort(v, n, sizeof(*v), by_use);
    for (size_t i = 0; i < n && total + need > c->cap; i++) {
        char lock[4200];
        snprintf(lock, sizeof(lock), "%s.lock", v[i].data);
        int fd = lock_entry(lock, LOCK_EX | LOCK_NB);
        if (fd < 0)
            continue; /* in use (or being fetched) */
        remove_entry(v[i].data);
        close(fd);
        total -= v[i].size;
        pthread_mutex_lock(&c->lock);
        c->stats.evicted++;
        pthread_mutex_unlock(&c->lock);
        ADAG_DATA_LOG_INFO("data cache: evicted %s (%llu bytes; least recently used)",
                           v[i].data, (unsigned long long)v[i].size);
    }
    if (total + need > c->cap)
        ADAG_DATA_LOG_INFO("data cache: %s holds %llu bytes in use; %llu more go over its cap "
                           "of %llu until they are released",
                           c->dir, (unsigned long long)total, (unsigned long long)need,
                           (unsigned long long)c->cap);
    for (size_t i = 0; i < n; i++)
        free(v[i].data);
    free(v);
    if (dfd >= 0)
        close(dfd);
}

/* ---- fetching an entry ---- */

static adag_status_t write_all(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return adag__error_errno(w < 0 ? errno : EIO, "data cache: writing a checksum file");
        s += w;
        n -= (size_t)w;
    }
    return ADAG_OK;
}

/* With the entry's lock held exclusively: fetches url into the entry. */
static adag_status_t fetch_entry(adag_data_cache_t *c, const entry_paths_t *e, const char *url,
                                 uint64_t *fetched)
{
    char tmp[4200], tmpsum[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", e->data);
    snprintf(tmpsum, sizeof(tmpsum), "%s.tmp.XXXXXX", e->sum);
    int fd = mkostemp(tmp, O_CLOEXEC), sfd = -1;
    if (fd < 0)
        return adag__error_errno(errno, "data cache: creating a file in %s", c->dir);
    uint64_t size = 0, hash = 0;
    adag_status_t st = adag__data_fetch(url, fd, &c->fetch, &size, &hash);
    if (st != ADAG_OK)
        goto fail;
    make_room(c, size);
    char text[4400];
    int len = snprintf(text, sizeof(text), SUM_MAGIC "\nsize %llu\nxxh3 %016llx\nurl %s\n",
                       (unsigned long long)size, (unsigned long long)hash, url);
    if ((sfd = mkostemp(tmpsum, O_CLOEXEC)) < 0) {
        st = adag__error_errno(errno, "data cache: creating a file in %s", c->dir);
        goto fail;
    }
    if ((st = write_all(sfd, text, (size_t)len)) != ADAG_OK)
        goto fail;
    /* the data and its sidecar reach the disk before either is in place;
     * then data, then sidecar: until both are, the entry does not verify */
    if (fsync(fd) != 0 || fsync(sfd) != 0) {
        st = adag__error_errno(errno, "data cache: syncing %s", tmp);
        goto fail;
    }
    if (rename(tmp, e->data) != 0 || rename(tmpsum, e->sum) != 0) {
        st = adag__error_errno(errno, "data cache: renaming into %s", e->data);
        goto fail;
    }
    close(fd);
    close(sfd);
    *fetched = size;
    return ADAG_OK;
fail:
    close(fd);
    unlink(tmp);
    if (sfd >= 0) {
        close(sfd);
        unlink(tmpsum);
    }
    return st;
}

static adag_status_t hold(adag_data_cache_t *c, int fd)
{
    adag_status_t st = ADAG_OK;
    pthread_mutex_lock(&c->lock);
    if (c->nheld == c->cap_held) {
        size_t n = c->cap_held ? 2 * c->cap_held : 16;
        int *h = realloc(c->held, n * sizeof(*h));
        if (!h) {
            st = adag__error(ADAG_ERR_NO_MEMORY, "data cache: out of memory");
            goto out;
        }
        c->held = h;
        c->cap_held = n;
    }
    c->held[c->nheld++] = fd;
out:
    pthread_mutex_unlock(&c->lock);
    return st;
}

adag_status_t adag__data_cache_get(adag_data_cache_t *c, const char *url, const char *suffix,
                                  char **stem)
{
    entry_paths_t e;
    char full[4200];
    int fetched_now = 0;
    uint64_t fetched = 0;
    *stem = NULL;
    if (snprintf(full, sizeof(full), "%s%s", url, suffix) >= (int)sizeof(full))
        return adag__error(ADAG_ERR_INVALID, "data cache: URL too long: %s", url);
    /* the entry of url + suffix lives at the stem of url, plus the suffix */
    adag_status_t st = entry_paths(c, url, suffix, &e, stem);
    if (st != ADAG_OK)
        return st;
    for (;;) {
        int fd = lock_entry(e.lock, LOCK_SH);
        if (fd < 0) {
            st = adag__error_errno(errno, "data cache: locking %s", e.lock);
            goto fail;
        }
        if (entry_valid(&e, full)) {
            utimensat(AT_FDCWD, e.sum, NULL, 0); /* used now: last in eviction order */
            if ((st = hold(c, fd)) != ADAG_OK) {
                close(fd);
                goto fail;
            }
            pthread_mutex_lock(&c->lock);
            if (fetched_now) {
                c->stats.misses++;
                c->stats.bytes_fetched += fetched;
            } else {
                c->stats.hits++;
            }
            pthread_mutex_unlock(&c->lock);
            return ADAG_OK;
        }
        close(fd);
        /* fetch it, unless another process does first (it holds the lock
         * exclusively while it fetches; we then find its entry valid) */
        if ((fd = lock_entry(e.lock, LOCK_EX)) < 0) {
            st = adag__error_errno(errno, "data cache: locking %s", e.lock);
            goto fail;
        }
        if (entry_valid(&e, full)) {
            close(fd);
            continue;
        }
        st = fetch_entry(c, &e, full, &fetched);
        close(fd); /* others may use it from here on; we take it shared again */
        if (st != ADAG_OK)
            goto fail;
        fetched_now = 1;
    }
fail:
    free(*stem);
    *stem = NULL;
    return st;
}

void adag__data_cache_stats(adag_data_cache_t *c, adag_data_cache_stats_t *out)
{
    pthread_mutex_lock(&c->lock);
    *out = c->stats;
    pthread_mutex_unlock(&c->lock);
}

void adag__data_cache_close(adag_data_cache_t *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nheld; i++)
        close(c->held[i]);
    free(c->held);
    free(c->dir);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
